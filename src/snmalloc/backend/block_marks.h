#pragma once
// Layer backend: the marks of freed runs that a free buddy block keeps.
//
// A freed run holds a mark in its first word (ds/encoded_link.h), even one
// whose pages were just replaced (clean).  The free block the run becomes,
// or merges into, records where: up to two chunks, as offsets in the upper
// bits of its FreeBlock tag (backend/free_block_lists.h), so the record
// costs no memory and no access beyond the tag the buddy writes anyway.
// When a block is taken, each mark among the chunks taken is compared; one
// the program overwrote after the free stops it (the backend reports it
// once its lock is released), before the memory's next owner sees the
// damage.  Two, because a run is often freed next to one freed just
// before it (the block before or after it in a buffer's life), and the
// two merge.  A merged block keeps the newly freed run's mark first, then
// its buddies'; a mark beyond two is compared as it is dropped (its page
// is resident, as every marked block's), and one at an offset past
// 2^23 - 2 chunks (128 GiB) is dropped unseen.  A block whose pages go
// back keeps none (they read as zero): its marks are compared as the
// decay takes it.  A clean block with marks reads as zero but for them:
// they are cleared as they are handed out, once compared, so that calloc
// need not zero it.

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
    static_assert(SHIFT + 2 * SLOT_BITS <= 8 * sizeof(uintptr_t) - 8, "two slots fit a tag's payload");

    size_t chunk[2] = {NONE, NONE};
    // The first mark found overwritten among those that found no slot.
    void* dropped_overwritten = nullptr;

    // The marks recorded in `payload`, the tag payload of the free block
    // at chunk `index`.
    static BlockMarks recorded(size_t index, uintptr_t payload)
    {
      BlockMarks marks;
      marks.add_recorded(index, payload);
      return marks;
    }

    // Add those recorded in `payload`, the tag payload of the block at
    // chunk `index`.  (Slots fill in order: an empty first slot means none.)
    void add_recorded(size_t index, uintptr_t payload)
    {
      size_t first = (payload >> SHIFT) & SLOT_MASK;
      if (first == 0)
        return;
      add(index + first - 1);
      size_t second = (payload >> (SHIFT + SLOT_BITS)) & SLOT_MASK;
      if (second != 0)
        add(index + second - 1);
    }

    // A mark with no slot left is compared now: a block freed in address
    // order after its neighbours merges with them, and the marks of the
    // middle ones went unread (a write into the fourth of eight 80 KiB
    // blocks freed in turn was missed).
    void add(size_t c)
    {
      if (chunk[0] == NONE)
        chunk[0] = c;
      else if (chunk[1] == NONE)
        chunk[1] = c;
      else if (dropped_overwritten == nullptr && !intact(c))
        dropped_overwritten = pagemap.chunk_address(c);
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
        if (c - begin < end - begin && !intact(c)) // NONE is never inside
          return pagemap.chunk_address(c);
      }
      return nullptr;
    }

    // Zero the marks among the chunks [begin, end).
    void clear(size_t begin, size_t end) const
    {
      for (size_t c : chunk)
      {
        if (c - begin < end - begin)
          *static_cast<uintptr_t*>(pagemap.chunk_address(c)) = 0;
      }
    }

    // Does chunk c still hold the mark written when its run was freed?
    static bool intact(size_t c)
    {
      void* at = pagemap.chunk_address(c);
      return *static_cast<const uintptr_t*>(at) == freed_run_mark(at);
    }
  };
} // namespace snmalloc
