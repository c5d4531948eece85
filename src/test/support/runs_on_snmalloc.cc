// Linked into every test executable that links the allocator (snmalloc_test
// in src/test/CMakeLists.txt): the check that it really runs on snmalloc.
// The shim's identity symbol answers, and memory from malloc and operator
// new is memory that snmalloc itself recognises; with profiling compiled
// in, the C API and the C++ API agree on whether profiling is running.
#include "support/alloc_checks.h"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <snmalloc/snmalloc.h>
#include <snmalloc/snmalloc_profile.h>
#include <string>

using namespace snmalloc_test;

TEST_CASE("runs on snmalloc")
{
  const char* identity = snmalloc_identity();
  REQUIRE(identity != nullptr);
  REQUIRE(std::string(identity) == "snmalloc");

  // A glibc pointer is unknown to snmalloc, so alloc_size of it could not be
  // the request rounded to a sizeclass.
  void* p = std::malloc(opaque(1000));
  REQUIRE(p != nullptr);
  REQUIRE(snmalloc::alloc_size(p) >= 1000);
  std::free(p);

  auto* q = static_cast<char*>(::operator new(opaque(3000)));
  REQUIRE(snmalloc::alloc_size(q) >= 3000);
  ::operator delete(q);

#if SNMALLOC_PROFILE // defined by snmalloc.h: 0 unless profiling is built in
  REQUIRE(snmalloc::config::profile);
  REQUIRE(snmalloc_profile_is_active() == (snmalloc::profile::is_active() ? 1 : 0));
#endif
}
