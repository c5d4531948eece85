#pragma once
// Layer mem: which of a slab's objects are on its free list.  The checks
// build keeps a bit an object, so that a free of an object already on the
// list is a double free caught at the free; the default build keeps nothing.

#include "../ds/ds.h"

namespace snmalloc
{
  // Which objects are on a slab's free list, kept by the checks build only
  // (SlabMeta::FreeBits is empty otherwise): a free of an object already
  // there is a double free, caught at the free itself.
  class OnFreeList
  {
    uint64_t bits_[MAX_CAPACITY / 64] = {};

  public:
    // Mark objects `from` to `capacity` - 1 as on the list and the slab's
    // others as off, a word at a time, only the words the slab uses (one
    // for classes of 256 bytes and more).  (As a loop clearing words, which
    // the compiler made a call of memset, the checks shim's own, then one
    // setting bits: 50 instructions a refill on larson.)
    void set_only(size_t from, size_t capacity)
    {
      for (size_t i = 0; i < (capacity + 63) / 64; i++)
      {
        size_t first = i * 64;
        uint64_t word = 0;
        if (from <= first)
          word = ~uint64_t(0);
        else if (from < first + 64)
          word = ~uint64_t(0) << (from - first);
        bits_[i] = word;
      }
    }

    // Mark object `index` as on the list; false if it already was.
    bool add(size_t index)
    {
      uint64_t& word = bits_[index / 64];
      uint64_t bit = uint64_t(1) << (index % 64);
      if ((word & bit) != 0)
        return false;
      word |= bit;
      return true;
    }
  };

  // The default build's: keeps nothing, costs nothing.
  struct NoFreeBits
  {
    void set_only(size_t, size_t) {}
    bool add(size_t)
    {
      return true;
    }
  };
} // namespace snmalloc
