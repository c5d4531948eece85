#pragma once
// Layer backend: the buddy allocator's free blocks and their lists.
//
// Free blocks are described out of band, in the pagemap entry of their first
// chunk, so a free block's memory is never touched (it may be decommitted):
//   owner = tag(FreeBlock, order | dirty << 6 | aged << 7 | marks << 8)
//   meta  = prev index << 32 | next index      (doubly linked per order)
// The exception is the first word of a run freed dirty (its pages not
// just replaced), its mark, which is compared when the chunk is taken
// again (the marks a block records: backend/block_marks.h).
// An entry carries a FreeBlock tag only while its block is on a free list:
// the tag is written on insertion and overwritten on removal, so the buddy
// test "entry says free with my order" is exact.  Below the frontier
// (chunks carved so far) every chunk is free, handed out, or off the lists
// while its pages go back (buddy.h, take_decaying).

#include "../ds/pagemap.h"

namespace snmalloc
{
  class FreeBlockLists
  {
  public:
    static constexpr size_t MAX_ORDER = 31;
    static constexpr uint32_t NONE = 0xffffffff;

  protected:
    uint32_t heads_[MAX_ORDER + 1] = {};
    uint32_t tails_[MAX_ORDER + 1] = {};
    size_t frontier_ = 0; // chunks carved so far
    size_t dirty_chunks_ = 0;

    static constexpr uintptr_t ORDER_MASK = 63;
    static constexpr uintptr_t DIRTY = 1 << 6;
    static constexpr uintptr_t AGED = 1 << 7;

    static uintptr_t free_tag(size_t order, uintptr_t flags)
    {
      return make_tag(ChunkKind::FreeBlock, order | flags);
    }

    static uintptr_t flags_of(size_t index)
    {
      return tag_payload(at(index).get_owner()) & (DIRTY | AGED);
    }

    static PagemapEntry& at(size_t index)
    {
      return pagemap.entries[index];
    }

    static uint32_t prev_of(size_t index)
    {
      return uint32_t(at(index).get_meta() >> 32);
    }

    static uint32_t next_of(size_t index)
    {
      return uint32_t(at(index).get_meta());
    }

    static void set_links(size_t index, uint32_t prev, uint32_t next)
    {
      at(index).meta.store(
        (uintptr_t(prev) << 32) | next, std::memory_order_relaxed);
    }

    // Freed blocks go to the front of their list and are reused first; the
    // tails cut off runs go to the back (behind tails_[order]), so that
    // they stay free as long as possible and merge back when their run is
    // freed; a decay puts its blocks back behind the block they followed.
    // `prev`: the free block of `order` to insert behind, NONE for the
    // front.
    void insert(size_t index, size_t order, uintptr_t flags, uint32_t prev = NONE)
    {
      at(index).owner.store(free_tag(order, flags), std::memory_order_relaxed);
      uint32_t next = prev == NONE ? heads_[order] : next_of(prev);
      set_links(index, prev, next);
      if (prev == NONE)
        heads_[order] = uint32_t(index);
      else
        set_links(prev, prev_of(prev), uint32_t(index));
      if (next == NONE)
        tails_[order] = uint32_t(index);
      else
        set_links(next, uint32_t(index), next_of(next));
      if ((flags & DIRTY) != 0)
        dirty_chunks_ += size_t(1) << order;
    }

    // The last of the blocks at the front of `order`'s list that are dirty
    // and young; NONE if its head is not such a block.  After a decay took
    // its blocks (aging the dirty ones it left), these are the blocks freed
    // since.
    uint32_t last_young_at_front(size_t order) const
    {
      uint32_t last = NONE;
      for (uint32_t i = heads_[order]; i != NONE && (flags_of(i) & (DIRTY | AGED)) == DIRTY; i = next_of(i))
        last = i;
      return last;
    }

    // Always inline, as GCC does in the plain shim: in the profiling one
    // (more callers) it was a call from each merge of a freed run.
    SNMALLOC_FAST_PATH void remove(size_t index, size_t order)
    {
      bool dirty = (flags_of(index) & DIRTY) != 0;
      uint32_t prev = prev_of(index);
      uint32_t next = next_of(index);
      if (prev == NONE)
        heads_[order] = next;
      else
        set_links(prev, prev_of(prev), next);
      if (next != NONE)
        set_links(next, prev, next_of(next));
      else
        tails_[order] = prev;
      at(index).set(0, 0);
      if (dirty)
        dirty_chunks_ -= size_t(1) << order;
    }

    // The tag payload (order, flags, marks) of the free block starting at
    // chunk `index`, if one does.
    bool free_payload_at(size_t index, uintptr_t& payload) const
    {
      if (index >= frontier_)
        return false;
      uintptr_t owner = at(index).get_owner();
      if (!is_tag_of(owner, ChunkKind::FreeBlock))
        return false;
      payload = tag_payload(owner);
      return true;
    }

    // The order of the free block starting at chunk `index`, if one does.
    bool free_block_at(size_t index, size_t& order) const
    {
      uintptr_t payload = 0;
      if (!free_payload_at(index, payload))
        return false;
      order = payload & ORDER_MASK;
      return true;
    }

    // Is the block at `index` free, of exactly `order`?
    bool is_free_block(size_t index, size_t order) const
    {
      size_t o = 0;
      return free_block_at(index, o) && o == order;
    }

    // Call f(index, order) for the largest aligned blocks that tile
    // [begin, end), in address order.
    template<typename F>
    static void for_each_aligned_block(size_t begin, size_t end, F&& f)
    {
      while (begin < end)
      {
        size_t o = begin == 0 ? MAX_ORDER : size_t(__builtin_ctzl(begin));
        if (o > MAX_ORDER)
          o = MAX_ORDER;
        while (begin + (size_t(1) << o) > end)
          o--;
        f(begin, o);
        begin += size_t(1) << o;
      }
    }
  };
} // namespace snmalloc
