// Catch2's main, linked into every test executable of this folder, with the
// check that the executable really runs on snmalloc: the shim's identity
// symbol answers, and memory from malloc and operator new is memory that
// snmalloc itself recognises.
#define CATCH_CONFIG_MAIN
#include "test_support.h"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <snmalloc/snmalloc.h>
#include <string>

using namespace snmalloc_test;

TEST_CASE("runs-on-snmalloc")
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
}
