// Properties of the sizeclasses, observed through the public API only:
// usable sizes cover the request, grow with it, waste at most a quarter
// (four sizeclasses per power of two) and small objects are naturally
// aligned.
#include "support/alloc_checks.h"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <malloc.h>
#include <set>
#include <snmalloc/snmalloc.h>
#include <vector>

using namespace snmalloc_test;

namespace
{
  constexpr size_t largest_small_size = 65536;
  constexpr size_t largest_probed_size = 70000;

  // usable[n] = alloc_size(alloc(n)) for n in 1..largest_probed_size.
  std::vector<size_t> probe_usable_sizes()
  {
    std::vector<size_t> usable(largest_probed_size + 1, 0);
    for (size_t n = 1; n <= largest_probed_size; n++)
    {
      void* p = snmalloc::alloc(opaque(n));
      usable[n] = p == nullptr ? 0 : snmalloc::alloc_size(p);
      snmalloc::dealloc(p);
    }
    return usable;
  }

  size_t lowest_set_bit(size_t x)
  {
    return x & (~x + 1);
  }
}

TEST_CASE("sizeclass-usable-size-properties")
{
  const std::vector<size_t> usable = probe_usable_sizes();
  size_t failures = 0;
  for (size_t n = 1; n <= largest_probed_size && failures < 10; n++)
  {
    bool covers = usable[n] >= n;
    bool monotone = usable[n] >= usable[n - 1];
    // Four classes per power of two: the next class is at most 1.25 times
    // the previous; the 16 covers the 16-byte minimum.
    bool tight = n > largest_small_size || 4 * usable[n] < 5 * n + 64;
    if (!(covers && monotone && tight))
    {
      failures++;
      FAIL_CHECK(
        "size " << n << " usable " << usable[n] << " (size " << n - 1
                << " had " << usable[n - 1] << ")");
    }
  }
  CHECK(failures == 0);
}

TEST_CASE("sizeclass-at-most-four-per-power-of-two")
{
  const std::vector<size_t> usable = probe_usable_sizes();
  for (size_t low = 16; low < largest_small_size; low *= 2)
  {
    std::set<size_t> classes;
    for (size_t n = low + 1; n <= 2 * low; n++)
      classes.insert(usable[n]);
    INFO("sizes " << low + 1 << ".." << 2 * low);
    CHECK(classes.size() <= 4);
  }
}

TEST_CASE("sizeclass-malloc-matches-cpp-api")
{
  for (size_t n = 1; n <= largest_probed_size; n += 7)
  {
    void* a = snmalloc::alloc(opaque(n));
    void* b = std::malloc(opaque(n));
    REQUIRE(a != nullptr);
    REQUIRE(b != nullptr);
    if (snmalloc::alloc_size(a) != malloc_usable_size(b))
      FAIL_CHECK(
        "size " << n << ": alloc_size " << snmalloc::alloc_size(a)
                << " malloc_usable_size " << malloc_usable_size(b));
    snmalloc::dealloc(a);
    std::free(b);
  }
}

TEST_CASE("sizeclass-natural-alignment")
{
  // An object of a small sizeclass is aligned to the largest power of two
  // dividing its size; this is what aligned allocation relies on. Several
  // objects per class, so more than the first of a slab is checked.
  for (size_t n = 16; n <= largest_small_size; n += n / 8)
  {
    std::vector<void*> live;
    for (int i = 0; i < 20; i++)
    {
      void* p = snmalloc::alloc(opaque(n));
      REQUIRE(p != nullptr);
      size_t natural = lowest_set_bit(snmalloc::alloc_size(p));
      if (!is_aligned(p, natural))
        FAIL_CHECK("size " << n << " at " << p << " not " << natural
                           << "-aligned");
      live.push_back(p);
    }
    for (void* p : live)
      snmalloc::dealloc(p);
  }
}

// The free's check of an object start (SlabMeta::check_free) takes index
// and start from one multiply by the class's reciprocal: both must agree
// with a division at every offset of every class's slab.
TEST_CASE("sizeclass-position-in-slab-is-division")
{
  size_t failures = 0;
  for (snmalloc::sizeclass_t sc = 0; sc < snmalloc::NUM_SMALL_CLASSES; sc++)
  {
    size_t size = snmalloc::sizeclass_to_size(sc);
    size_t slab = size_t(1) << snmalloc::sizeclasses.slab_bits[sc];
    for (size_t offset = 0; offset < slab && failures < 10; offset++)
    {
      snmalloc::SlabPosition at = snmalloc::position_in_slab(offset, sc);
      if (at.index != offset / size || at.at_start != (offset % size == 0))
      {
        failures++;
        FAIL_CHECK("class " << sc << " offset " << offset << ": index " << at.index << " start " << at.at_start);
      }
    }
  }
  CHECK(failures == 0);
}

// The default build's owner free (CoreAlloc::dealloc_local) tells an
// object's start from one multiply and a compare, for offsets within a slab
// (those the pagemap leads to): true at each object's start, false at every
// other offset, within an object or in the slack past the last one.
TEST_CASE("sizeclass-starts-object-is-exact-within-a-slab")
{
  size_t failures = 0;
  for (snmalloc::sizeclass_t sc = 0; sc < snmalloc::NUM_SMALL_CLASSES; sc++)
  {
    size_t size = snmalloc::sizeclass_to_size(sc);
    size_t capacity = snmalloc::sizeclasses.capacity[sc];
    size_t slab = size_t(1) << snmalloc::sizeclasses.slab_bits[sc];
    for (size_t offset = 0; offset < slab && failures < 10; offset++)
    {
      bool start = offset % size == 0 && offset / size < capacity;
      if (snmalloc::object_starts_at(offset, sc) != start)
      {
        failures++;
        FAIL_CHECK("class " << sc << " (size " << size << ") offset " << offset << ": start " << start);
      }
    }
  }
  CHECK(failures == 0);
}
