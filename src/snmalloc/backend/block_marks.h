#pragma once
// Layer backend: the marks of freed runs that a free buddy block keeps.
//
// A run freed dirty (its pages not just replaced) holds a mark in its
// first word (ds/encoded_link.h).  The free block the run becomes, or
// merges into, records where: up to two chunks, as offsets in the upper
// bits of its FreeBlock tag (backend/free_block_lists.h), so the record
// costs no memory and no access beyond the tag the buddy writes anyway.  When a
// block is taken, each mark among the chunks taken is compared; one the
// program overwrote after the free stops it (the backend reports it once
// its lock is released), before the memory's next owner sees the damage.
// Two, because a run is often freed next to one freed just before it (the
// block before or after it in a buffer's life), and the two merge.  A
// merged block keeps the newly freed run's mark first, then its buddies';
// marks beyond two, and offsets past 2^23 - 2 chunks (128 GiB), are
// dropped: a write there goes unseen, as it did before marks.  A block
// whose pages go back keeps none (they read as zero).

#include "../ds/encoded_link.h"
#include "../ds/pagemap.h"

namespace snmalloc
{
  struct BlockMarks
  {
    static constexpr size_t NONE = ~size_t(0);
    // Where the marks sit among a FreeBlock tag's payload bits: above the
    // order (6 bits) and the buddy's two flags; each slot holds offset + 1,
    // 0 when empty.
    static constexpr size_t SHIFT = 8;
    static constexpr size_t SLOT_BITS = 23;
    static constexpr uintptr_t SLOT_MASK = (uintptr_t(1) << SLOT_BITS) - 1;

    size_t chunk[2] = {NONE, NONE};

    // The marks recorded in `payload`, the tag payload of the free block
    // at chunk `index`.
    static BlockMarks recorded(size_t index, uintptr_t payload)
    {
      BlockMarks marks;
      marks.add_recorded(index, payload);
      return marks;
    }

    // Add those recorded in `payload`, the tag payload of the block at
    // chunk `index`, while there is room.  (Slots fill in order: an empty
    // first slot means none.)
    void add_recorded(size_t index, uintptr_t payload)
    {
      size_t first = (payload >> SHIFT) & SLOT_MASK;
      if (first == 0 || chunk[1] != NONE)
        return;
      add(index + first - 1);
      size_t second = (payload >> (SHIFT + SLOT_BITS)) & SLOT_MASK;
      if (second != 0)
        add(index + second - 1);
    }

    void add(size_t c)
    {
      if (chunk[0] == NONE)
        chunk[0] = c;
      else if (chunk[1] == NONE)
        chunk[1] = c;
    }

    // The payload bits recording those of these marks that lie in the
    // block of 2^order chunks at `index`.
    uintptr_t bits_for(size_t index, size_t order) const
    {
      if (chunk[0] == NONE)
        return 0;
      uintptr_t bits = 0;
      size_t shift = SHIFT;
      for (size_t c : chunk)
      {
        size_t offset = c - index; // past the block when c is below it or NONE
        if (offset < (size_t(1) << order) && offset < SLOT_MASK)
        {
          bits |= uintptr_t(offset + 1) << shift;
          shift += SLOT_BITS;
        }
      }
      return bits;
    }

    // The chunks [begin, end) are handed out: each mark among them must
    // still be in place.  The first that is not, or nullptr.
    void* overwritten(size_t begin, size_t end) const
    {
      for (size_t c : chunk)
      {
        if (c - begin >= end - begin) // NONE too
          continue;
        void* at = pagemap.chunk_address(c);
        if (*static_cast<const uintptr_t*>(at) != freed_run_mark(at))
          return at;
      }
      return nullptr;
    }
  };
} // namespace snmalloc
