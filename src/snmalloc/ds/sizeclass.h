#pragma once
// Layer ds: the sizeclass table.
//
// Classes are 16, 32, 48, 64 and then four per power of two up to 64 KiB:
// 80, 96, 112, 128, 160, 192, ...  A class of size S laid out from a slab
// aligned to the slab size puts every object at a multiple of S, so an object
// is aligned to the largest power of two dividing S.  Rounding a request up to
// a multiple of its alignment and taking the class of that therefore serves
// aligned requests: the class of a multiple of 2^k is itself a multiple of 2^k
// (tested in the sizeclass test).

#include "../ds_core/ds_core.h"

#include <array>

namespace snmalloc
{
  using sizeclass_t = uint32_t;

  constexpr size_t NUM_SMALL_CLASSES =
    4 + 4 * (config::MAX_SMALL_BITS - (config::MIN_ALLOC_BITS + 2));

  constexpr size_t class_to_size_compute(size_t sc)
  {
    if (sc < 4)
      return config::MIN_ALLOC_SIZE * (sc + 1);
    size_t k = (sc - 4) / 4 + config::MIN_ALLOC_BITS + 2; // the power of two below
    size_t step = size_t(1) << (k - 2);
    return (size_t(1) << k) + ((sc - 4) % 4 + 1) * step;
  }

  // Slabs are a power of two of chunks, at least config::MIN_SLAB_SIZE,
  // holding at least a dozen objects.
  constexpr size_t slab_size_compute(size_t object_size)
  {
    size_t want = object_size * config::MIN_OBJECTS_PER_SLAB;
    return want <= config::MIN_SLAB_SIZE ? config::MIN_SLAB_SIZE : bits::next_pow2(want);
  }

  struct SizeclassTable
  {
    // Indexed by (size - 1) >> MIN_ALLOC_BITS for 1 <= size <= MAX_SMALL_SIZE.
    std::array<uint8_t, config::MAX_SMALL_SIZE / config::MIN_ALLOC_SIZE> of_size{};
    std::array<uint32_t, NUM_SMALL_CLASSES> size{};
    std::array<uint32_t, NUM_SMALL_CLASSES> slab_bits{};
    std::array<uint32_t, NUM_SMALL_CLASSES> capacity{};
    // A sleeping slab wakes (rejoins its class's available list) after this
    // many local frees, so a slab is not revisited for every single free: a
    // quarter of its objects, capped at config::SLAB_WAKE_BYTES of them (at
    // least one), so that what is handed out again is still in the cache.
    std::array<uint32_t, NUM_SMALL_CLASSES> wake_threshold{};
    // Objects of a slab's untouched part that one refill links (and so
    // touches): a chunk's worth, so one object of a large class does not
    // make its whole slab resident (linking all of a 4 KiB class's 64 KiB
    // slab wrote 16 pages for its first object).
    std::array<uint32_t, NUM_SMALL_CLASSES> untouched_step{};
    // The same for a fresh slab's first refill: a page's worth, so that a
    // class a program takes a few objects of costs it one page, not a
    // chunk's four (a C++ child allocating 256 blocks of 16..4096 bytes:
    // 349 page faults, 306 so, glibc 253).  At least two objects (up to
    // the chunk's step): the first object's neighbour is then on the free
    // list, where an overflow off its end meets a link the next malloc
    // checks (with one, the bug suite's overflows of 4 KiB objects went
    // unseen, 73 -> 68 of 144; 74 so).  Later refills link a chunk's worth:
    // a page's at every refill made 295 faults there, but cost a heap that
    // fills its slabs 3.1% more instructions (perf-peak-growth; 0.94% so).
    std::array<uint32_t, NUM_SMALL_CLASSES> first_untouched_step{};
    // ceil(2^64 / size): an offset in a slab divided by the size is the
    // high word of its product with this (exact while offset * size <
    // 2^64), a multiply instead of a division for the checks of frees.
    std::array<uint64_t, NUM_SMALL_CLASSES> reciprocal{};
    // For object_starts_at: 2^64 / size rounded down, plus one, and the
    // capacity times the low word of its product with the size.
    std::array<uint64_t, NUM_SMALL_CLASSES> start_multiplier{};
    std::array<uint64_t, NUM_SMALL_CLASSES> start_bound{};

    constexpr SizeclassTable()
    {
      size_t sc = 0;
      for (size_t i = 0; i < of_size.size(); i++)
      {
        size_t request = (i + 1) << config::MIN_ALLOC_BITS;
        while (class_to_size_compute(sc) < request)
          sc++;
        of_size[i] = static_cast<uint8_t>(sc);
      }
      for (size_t c = 0; c < NUM_SMALL_CLASSES; c++)
      {
        size_t s = class_to_size_compute(c);
        size_t slab = slab_size_compute(s);
        size[c] = static_cast<uint32_t>(s);
        slab_bits[c] = static_cast<uint32_t>(bits::log2_floor(slab));
        capacity[c] = static_cast<uint32_t>(slab / s);
        size_t wake = capacity[c] / 4;
        if (wake * s > config::SLAB_WAKE_BYTES)
          wake = config::SLAB_WAKE_BYTES / s;
        wake_threshold[c] = static_cast<uint32_t>(wake == 0 ? 1 : wake);
        size_t step = config::CHUNK_SIZE / s;
        untouched_step[c] = static_cast<uint32_t>(step == 0 ? 1 : step);
        size_t first = config::SLAB_FIRST_STEP_BYTES / s;
        first = first < 2 ? 2 : first;
        first_untouched_step[c] =
          static_cast<uint32_t>(first < untouched_step[c] ? first : untouched_step[c]);
        reciprocal[c] = ~uint64_t(0) / s + 1;
        bool power_of_two = (s & (s - 1)) == 0;
        start_multiplier[c] = ~uint64_t(0) / s + 1 + (power_of_two ? 1 : 0);
        start_bound[c] = capacity[c] * (start_multiplier[c] * s);
      }
    }
  };

  inline constexpr SizeclassTable sizeclasses{};

  // Objects in the fullest slab (the smallest class in the smallest slab),
  // rounded to whole 64-bit words of a bitmap.
  constexpr size_t MAX_CAPACITY = bits::align_up(config::MIN_SLAB_SIZE / config::MIN_ALLOC_SIZE, 64);

  static_assert(class_to_size_compute(NUM_SMALL_CLASSES - 1) == config::MAX_SMALL_SIZE);

  // Requires 1 <= size <= MAX_SMALL_SIZE.
  SNMALLOC_FAST_PATH sizeclass_t size_to_sizeclass(size_t size)
  {
    return sizeclasses.of_size[(size - 1) >> config::MIN_ALLOC_BITS];
  }

  SNMALLOC_FAST_PATH size_t sizeclass_to_size(sizeclass_t sc)
  {
    return sizeclasses.size[sc];
  }

  // offset / sizeclass_to_size(sc), for offsets within a slab.
  SNMALLOC_FAST_PATH size_t index_in_slab(size_t offset, sizeclass_t sc)
  {
    return size_t((unsigned __int128)offset * sizeclasses.reciprocal[sc] >> 64);
  }

  // The object at `offset` within a slab of class sc, and whether `offset`
  // is its start, from one multiply: the product's high word is the index,
  // and offset is a multiple of the size exactly when its low word is
  // below the reciprocal (Lemire, Kaser and Kurz, "Faster remainder by
  // direct computation", 2019: offsets of 20 bits, sizes of 16; checked
  // for every offset of every class in the sizeclass test).  Saves the
  // check of a free a load and a multiply.
  struct SlabPosition
  {
    size_t index;
    bool at_start;
  };

  SNMALLOC_FAST_PATH SlabPosition position_in_slab(size_t offset, sizeclass_t sc)
  {
    unsigned __int128 product = (unsigned __int128)offset * sizeclasses.reciprocal[sc];
    return {size_t(product >> 64), uint64_t(product) < sizeclasses.reciprocal[sc]};
  }

  // Is `offset`, within a slab of class sc (below its slab size), where one
  // of its objects starts?  One multiply and a compare: with m = 2^64 /
  // size rounded down, plus one, and e = m * size - 2^64 (between 1 and the
  // size), offset q * size + r has the low word q * e + r * m: below
  // capacity * e exactly when r is 0 and q below the capacity, as r * m is
  // at least 2^64 / size and q * e below 2^20 (Lemire, Kaser and Kurz,
  // "Faster remainder by direct computation", 2019, with the bound taking
  // in the slack past the last object).  Checked for every offset of every
  // class in the sizeclass test.
  SNMALLOC_FAST_PATH bool object_starts_at(size_t offset, uint64_t multiplier, uint64_t bound)
  {
    return offset * multiplier < bound;
  }

  SNMALLOC_FAST_PATH bool object_starts_at(size_t offset, sizeclass_t sc)
  {
    return object_starts_at(offset, sizeclasses.start_multiplier[sc], sizeclasses.start_bound[sc]);
  }

  // The smallest size >= `size` that is a multiple of `align` (a power of
  // two), so that the sizeclass of the result is `align`-aligned.
  constexpr size_t aligned_size(size_t align, size_t size)
  {
    return ((align - 1) | (size - 1)) + 1;
  }
} // namespace snmalloc
