// Memory goes back to the OS: after a large live set is touched and freed,
// the resident set size (from /proc/self/statm) falls by most of it.
//
// The bound: at least 75% of the growth must be returned. An allocator
// legitimately keeps some of it: cached empty slabs per sizeclass, a cache
// of recently freed chunks it returns with a delay, the committed pagemap
// (about 1 MiB per GiB of heap) and slab metadata. Those are a few tens of
// MiB; a quarter of the live set leaves room for them, while an allocator
// that keeps its freed memory resident retains close to 100% and fails.
// Memory that is returned lazily gets up to 5 seconds, during which the
// test keeps allocating a little so slow paths that return memory run.
//
// The checks are hidden from a plain run: ctest runs each in a process of
// its own (see CMakeLists.txt), so memory one check kept cannot hide the
// growth the next one measures.
#include "support/alloc_checks.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <random>
#include <thread>
#include <vector>

using namespace snmalloc_test;

namespace
{
  constexpr size_t mib = size_t(1) << 20;
  constexpr size_t smallest_object = 16;
  constexpr size_t largest_object = 512;
  constexpr size_t smallest_large_block = 64 * 1024;
  constexpr size_t largest_large_block = mib;
  constexpr double required_fraction_returned = 0.75;
  constexpr auto patience = std::chrono::seconds(5);

  struct LiveSet
  {
    size_t small_bytes;
    size_t large_bytes;
  };

  // The sizes of the blocks making up the live set, large blocks first.
  std::vector<size_t> plan_block_sizes(LiveSet wanted)
  {
    std::mt19937_64 rng(wanted.small_bytes ^ wanted.large_bytes);
    std::vector<size_t> sizes;
    for (size_t bytes = 0; bytes < wanted.large_bytes;)
    {
      sizes.push_back(smallest_large_block +
        rng() % (largest_large_block - smallest_large_block + 1));
      bytes += sizes.back();
    }
    for (size_t bytes = 0; bytes < wanted.small_bytes;)
    {
      sizes.push_back(
        smallest_object + rng() % (largest_object - smallest_object + 1));
      bytes += sizes.back();
    }
    return sizes;
  }

  // Allocates and touches the live set, frees it, and checks the resident
  // set falls by the required fraction of the growth.
  void check_resident_set_falls(LiveSet wanted)
  {
    const std::vector<size_t> sizes = plan_block_sizes(wanted);
    // Made before the baseline, so the bookkeeping is not counted.
    std::vector<void*> blocks(sizes.size(), nullptr);
    const size_t baseline = resident_bytes();

    size_t allocated = 0;
    for (size_t i = 0; i < sizes.size(); i++)
    {
      blocks[i] = std::malloc(sizes[i]);
      REQUIRE(blocks[i] != nullptr);
      std::memset(blocks[i], 0x77, sizes[i]);
      allocated += sizes[i];
    }

    const size_t peak = resident_bytes();
    INFO("baseline " << baseline / mib << " MiB, peak " << peak / mib << " MiB");
    // The measurement itself: touching the live set must have shown up.
    REQUIRE(peak >= baseline + allocated * 9 / 10);

    for (void* p : blocks)
      std::free(p);

    const double growth = static_cast<double>(peak - baseline);
    auto returned = [&] {
      size_t now = resident_bytes();
      return now < peak ? static_cast<double>(peak - now) : 0.0;
    };
    const auto give_up = std::chrono::steady_clock::now() + patience;
    while (returned() < required_fraction_returned * growth &&
           std::chrono::steady_clock::now() < give_up)
    {
      for (size_t size = 16; size <= mib; size *= 4)
      {
        void* p = std::malloc(size);
        escape(p);
        std::free(p);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    const double returned_bytes = returned();
    INFO("returned " << returned_bytes / mib << " of " << growth / mib << " MiB");
    CHECK(returned_bytes >= required_fraction_returned * growth);
  }
}

TEST_CASE("rss-falls-after-large-blocks-freed", "[.]")
{
  check_resident_set_falls({0, 512 * mib});
}

TEST_CASE("rss-falls-after-small-objects-freed", "[.]")
{
  check_resident_set_falls({512 * mib, 0});
}

TEST_CASE("rss-falls-after-mixed-gib-freed", "[.]")
{
  check_resident_set_falls({512 * mib, 512 * mib});
}
