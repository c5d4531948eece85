// The C++ front: snmalloc::alloc, alloc_aligned, dealloc (plain and sized)
// and alloc_size, and that it shares one heap with malloc; the allocation
// labels' API, which every build has.
#include "support/alloc_checks.h"

#include <catch2/catch.hpp>
#include <cerrno>
#include <cstdlib>
#include <malloc.h>
#include <set>
#include <snmalloc/snmalloc.h>
#include <snmalloc/snmalloc_profile.h>
#include <vector>

using namespace snmalloc_test;

namespace
{
  const size_t api_sizes[] = {
    1, 15, 16, 17, 64, 100, 1000, 4096, 5000, 65536, 65537, 300000, 1 << 22};
}

TEST_CASE("snmalloc-alloc-zero-is-unique")
{
  std::set<void*> seen;
  std::vector<void*> live;
  for (int i = 0; i < 100; i++)
  {
    void* p = snmalloc::alloc(opaque(0));
    REQUIRE(p != nullptr);
    REQUIRE(seen.insert(p).second);
    live.push_back(p);
  }
  for (void* p : live)
    snmalloc::dealloc(p);
}

TEST_CASE("snmalloc-dealloc-null")
{
  void* volatile null_block = nullptr;
  snmalloc::dealloc(null_block);
  SUCCEED("dealloc(nullptr) returned");
}

TEST_CASE("snmalloc-alloc-size")
{
  for (size_t n : api_sizes)
  {
    INFO("size " << n);
    void* p = snmalloc::alloc(opaque(n));
    REQUIRE(p != nullptr);
    CHECK(is_aligned(p, alignof(std::max_align_t)));
    size_t usable = snmalloc::alloc_size(p);
    CHECK(usable >= n);
    CHECK(whole_range_writable(p, usable, n));
    snmalloc::dealloc(p);
  }
}

TEST_CASE("snmalloc-sized-dealloc")
{
  // The size given to dealloc may be the request or the usable size.
  for (size_t n : api_sizes)
  {
    INFO("size " << n);
    void* p = snmalloc::alloc(opaque(n));
    REQUIRE(p != nullptr);
    snmalloc::dealloc(p, n);

    p = snmalloc::alloc(opaque(n));
    REQUIRE(p != nullptr);
    snmalloc::dealloc(p, snmalloc::alloc_size(p));
  }
}

TEST_CASE("snmalloc-api-shares-heap-with-malloc")
{
  for (size_t n : api_sizes)
  {
    INFO("size " << n);
    void* p = snmalloc::alloc(opaque(n));
    REQUIRE(p != nullptr);
    CHECK(malloc_usable_size(p) == snmalloc::alloc_size(p));
    std::free(p);

    p = std::malloc(opaque(n));
    REQUIRE(p != nullptr);
    CHECK(snmalloc::alloc_size(p) == malloc_usable_size(p));
    snmalloc::dealloc(p, n);
  }
}

// Allocation labels are part of the API in every build: with profiling they
// are checked and kept (func-profile-labels reads them back); without, every
// call is accepted, keeps nothing and returns 0.
TEST_CASE("allocation-labels-exist-in-every-build")
{
  const int refused = snmalloc::Profiler::enabled ? EINVAL : 0;
  {
    snmalloc::profile::ScopedLabel outer("tenant", "acme");
    snmalloc::profile::ScopedLabel inner("request", "r1");
    void* p = std::malloc(100);
    REQUIRE(p != nullptr);
    std::free(p);
  }
  CHECK(snmalloc::profile::pop_label() == refused);
  CHECK(snmalloc_profile_label_push(nullptr, "v") == refused);
  CHECK(snmalloc_profile_label_push("k", "v") == 0);
  CHECK(snmalloc_profile_label_pop() == 0);
  CHECK(snmalloc_profile_label_pop() == refused);
}
