#pragma once
// Layer backend: a buddy allocator of chunks.
//
// Free memory is kept as power-of-two blocks aligned to their size, so that
// freeing merges buddies back.  A caller may take a *run* of any number of
// chunks: the smallest block that holds it (and its alignment) is split off,
// the tail past the run goes straight back as the aligned blocks it is made
// of, and freeing a run gives back the aligned blocks it is made of, which
// merge with their free buddies.  A 1 MiB + 16 KiB run therefore occupies
// 65 chunks, not the 128 of its power of two.  A large run may instead be
// placed at any chunk across neighbouring free blocks (Fit::Packed), so
// that the pages of freed runs are reused by runs of any size that fit.
// The free blocks and their lists: backend/free_block_lists.h.
//
// Fresh blocks are carved from a frontier that only moves up; everything
// behind it has been handed out at least once.  "Dirty" blocks may hold
// resident pages; clean ones read as zero (fresh, or decommitted).  Dirty
// blocks age: a decay returns the pages of blocks already aged at the
// previous one and ages the rest, so memory reused within one period is
// never decommitted and memory left free for two periods always is.  The
// blocks whose pages go back leave the free lists for the while, so that
// the madvise calls run outside the backend's lock (take_decaying,
// decommit_taken, put_back_taken).
// Not thread-safe: the backend holds its lock around every call but
// decommit_taken's.

#include "arena.h"
#include "block_marks.h"
#include "free_block_lists.h"

namespace snmalloc
{
  class Buddy : public FreeBlockLists
  {
  public:
    struct Block
    {
      size_t index = 0; // first chunk, relative to the arena base
      bool dirty = false;
      bool ok = false;
      // Those of the block it was split from; those inside it were checked.
      BlockMarks marks;
    };

  private:
    // A freed run's mark found overwritten, for the caller to report once
    // it no longer holds the lock (take_overwritten).
    void* overwritten_ = nullptr;
    Arena* arena_ = nullptr;

    void note_overwritten(void* at)
    {
      if (at != nullptr && overwritten_ == nullptr)
        overwritten_ = at;
    }

    // The chunks [begin, end) of a free block with `marks` and `flags` are
    // handed out: each mark among them compared, and in a clean block
    // cleared, so that it reads as zero whole, as its flag says.
    void taking(const BlockMarks& marks, uintptr_t flags, size_t begin, size_t end)
    {
      note_overwritten(marks.overwritten(begin, end));
      if ((flags & DIRTY) == 0)
        marks.clear(begin, end);
    }

    // Extend the frontier by a block of `order`, aligned to its size; the
    // skipped gap becomes free blocks.
    Block carve(size_t order)
    {
      size_t size = size_t(1) << order;
      size_t start = bits::align_up(frontier_, size);
      size_t limit = pagemap.size >> config::CHUNK_BITS;
      if (start + size > limit || start + size < start)
        return {};
      if (!arena_->ensure_committed(
            pagemap.base + ((start + size) << config::CHUNK_BITS)))
        return {};
      size_t gap = frontier_;
      frontier_ = start + size;
      for_each_aligned_block(gap, start, [&](size_t i, size_t o) { insert(i, o, 0); });
      return {start, false, true, {}};
    }

    // The order of the free block ending just before chunk `index`, if one
    // does (a block is aligned to its size, so few orders can).
    bool free_block_before(size_t index, size_t& order) const
    {
      if (index == 0)
        return false;
      size_t max_order = size_t(__builtin_ctzl(index));
      for (order = 0; order <= max_order && order <= MAX_ORDER; order++)
      {
        if (is_free_block(index - (size_t(1) << order), order))
          return true;
      }
      return false;
    }

    // A free range that can hold no resident page ranks after every one
    // that may: preferring them changed neither benchmark's peak, but a
    // small run no longer takes fresh pages from a clean hole while a
    // freed run could hold it (func-api-large-freed-reused).
    static constexpr size_t CLEAN_RANK = size_t(1) << 40;

    // Free blocks looked at before the best so far is taken, or, if none
    // fits, the buddy placement (Fit::Low).  Large-churn's peak RSS is the
    // same with no bound (109.1 MiB; 114.0 at 64); with 1,000 free ranges
    // of 900 KiB and a 1 MiB malloc and free in a loop, a call looked at
    // all of them, 217 k instructions (91 us; 10 us with the bound).
    static constexpr size_t PACKED_SCAN_LIMIT = 128;

    // Where a run of `chunks` chunks goes when it may span neighbouring
    // free blocks: the start of the smallest range of free chunks that
    // holds it, the lowest of equals (best fit, as glibc's large bins
    // are), ranked by CLEAN_RANK; else the start of the free range that
    // ends at the frontier, which can grow; NONE when the scan was cut
    // short with nothing found.
    size_t packed_start(size_t chunks) const
    {
      // A free range of at least `chunks` holds a block of at least half
      // the power of two below it, so smaller blocks are not looked at;
      // each range is judged from the first such block in it.
      size_t min_order = bits::log2_floor(chunks);
      min_order = min_order > 0 ? min_order - 1 : 0;
      size_t best = NONE;
      size_t best_rank = ~size_t(0);
      size_t o = 0;
      size_t budget = PACKED_SCAN_LIMIT;
      // A range is at least as long as any block in it: past the best
      // length, no order can beat it (large-churn: the scan went through
      // every order up to MAX_ORDER, most of them empty).
      for (size_t order = min_order; order <= MAX_ORDER && (size_t(1) << order) <= best_rank;
           order++)
      {
        for (uint32_t i = heads_[order]; i != NONE; i = next_of(i))
        {
          if (budget-- == 0)
            return best;
          uintptr_t flags = flags_of(i);
          size_t end = i + (size_t(1) << order);
          while (end - i <= best_rank && free_block_at(end, o))
          {
            flags |= flags_of(end);
            end += size_t(1) << o;
          }
          // Before the first such block lie less than 2^min_order free
          // chunks: the walk back (a probe per order) only where the range
          // may fit and beat the best.
          if (end == frontier_ || end - i + (size_t(1) << min_order) <= chunks ||
              end - i > best_rank)
            continue;
          size_t begin = i;
          bool first = true;
          while (first && free_block_before(begin, o))
          {
            first = o < min_order;
            begin -= size_t(1) << o;
            flags |= flags_of(begin);
          }
          if (!first)
            continue;
          size_t length = end - begin;
          size_t rank = length | ((flags & DIRTY) != 0 ? 0 : CLEAN_RANK);
          if (length < chunks || rank > best_rank ||
              (rank == best_rank && begin > best))
            continue;
          best = begin;
          best_rank = rank;
        }
      }
      if (best != NONE)
        return best;
      best = frontier_;
      while (free_block_before(best, o))
        best -= size_t(1) << o;
      return best;
    }

  public:
    void init(Arena* arena)
    {
      arena_ = arena;
      for (auto& h : heads_)
        h = NONE;
      for (auto& t : tails_)
        t = NONE;
    }

    size_t dirty_bytes() const
    {
      return dirty_chunks_ << config::CHUNK_BITS;
    }

    // Chunks from the arena's base up to the frontier: no chunk beyond was
    // ever handed out.
    size_t chunks_carved() const
    {
      return frontier_;
    }

    // The start of a freed run that the program wrote to after its free,
    // found by a call since the last take; nullptr if none.
    void* take_overwritten()
    {
      void* at = overwritten_;
      overwritten_ = nullptr;
      return at;
    }

    // Which free block a request takes (alloc).
    enum class Fit
    {
      // The head of the smallest order's list that has one: the most
      // recently freed, so warm.  Slabs and metadata.
      Warm,
      // That, or the head of the next order's list if it lies lower:
      // large runs.  Lower addresses first keep short the range of memory
      // that has held pages; going at most one order up keeps the larger
      // blocks whole for runs to grow into.  Measured by peak RSS
      // (large-churn, realloc-growth): Warm 151.0 and 26.5 MiB; Low 138.8
      // and 20.9 MiB; the lowest of the heads of every order 140.6 and
      // 20.6 MiB, but two buffers growing in turns to 128 MiB then moved
      // 100 times instead of a few (func-api-large).  Slabs taking the
      // lower block too raised thread-churn's from 54 to 63 MiB.
      Low,
      // Across neighbouring free blocks at any chunk, best fit
      // (packed_start): large runs that are not growing.  Large-churn's
      // peak RSS 142.2 MiB with Low, 109.2 (glibc's 109.0), and its page
      // faults 34.9 k -> 26.7 k; the lowest range first 115.0.  A growing
      // run packed so has no room after it: realloc-growth made 14.8 k
      // large allocations instead of 5.7 k, 15% slower.
      Packed,
    };

    // A block of `order`, split down from the one `fit` picks.
    Block alloc(size_t order, Fit fit = Fit::Warm)
    {
      if (order > MAX_ORDER)
        return {};
      size_t o = order;
      while (o <= MAX_ORDER && heads_[o] == NONE)
        o++;
      if (o > MAX_ORDER)
        return carve(order);
      if (fit == Fit::Low && o < MAX_ORDER && heads_[o + 1] < heads_[o])
        o++;
      size_t index = heads_[o];
      uintptr_t payload = tag_payload(at(index).get_owner());
      uintptr_t flags = payload & (DIRTY | AGED);
      BlockMarks marks = BlockMarks::recorded(index, payload);
      remove(index, o);
      taking(marks, flags, index, index + (size_t(1) << order));
      // Split down, keeping the lower half each time.
      while (o > order)
      {
        o--;
        size_t half = index + (size_t(1) << o);
        insert(half, o, flags | marks.bits_for(half, o));
      }
      return {index, (flags & DIRTY) != 0, true, marks};
    }

    // `chunks` chunks starting at a multiple of 2^align_order chunks.  The
    // block they are cut from is dirty if any of it may be.
    Block alloc_run(size_t chunks, size_t align_order, Fit fit)
    {
      if (fit == Fit::Packed && align_order == 0)
      {
        size_t start = packed_start(chunks);
        bool dirty = false;
        if (start != NONE && claim(start, chunks, dirty))
          return {start, dirty, true, {}};
        fit = Fit::Low;
      }
      size_t order = bits::log2_ceil(chunks);
      if (order < align_order)
        order = align_order;
      Block b = alloc(order, fit);
      if (b.ok)
      {
        // alloc compared the whole block's marks, and in a clean one
        // cleared them: a clean tail keeps none.
        for_each_aligned_block(b.index + chunks, b.index + (size_t(1) << order), [&](size_t i, size_t o) {
          insert(i, o, b.dirty ? DIRTY | b.marks.bits_for(i, o) : 0, tails_[o]);
        });
      }
      return b;
    }

    // Give back a run from alloc_run (or any range of chunks handed out).
    // Clean runs read as zero (their pages were just replaced); a `marked`
    // one holds its mark in its first word.
    void dealloc_run(size_t index, size_t chunks, bool clean = false, bool marked = false)
    {
      for_each_aligned_block(index, index + chunks, [&](size_t i, size_t o) {
        dealloc(i, o, clean, marked && i == index);
      });
    }

    // Take the chunks [index, index + chunks) if every one is free or beyond
    // the frontier: for a run ending at `index` to grow into, or a packed
    // run at the start of a free range.  The chunk before `index` is not
    // free, so each free block among them starts where the one before
    // ends.  Sets `dirty` if any of them may hold resident pages.
    bool claim(size_t index, size_t chunks, bool& dirty)
    {
      size_t end = index + chunks;
      size_t limit = pagemap.size >> config::CHUNK_BITS;
      if (end > limit || end < index)
        return false;
      size_t order = 0;
      for (size_t i = index; i < end && i < frontier_; i += size_t(1) << order)
      {
        if (!free_block_at(i, order))
          return false;
      }
      if (end > frontier_ &&
          !arena_->ensure_committed(pagemap.base + (end << config::CHUNK_BITS)))
        return false;
      dirty = false;
      for (size_t i = index; i < end && i < frontier_;)
      {
        uintptr_t payload = 0;
        free_payload_at(i, payload);
        order = payload & ORDER_MASK;
        uintptr_t flags = payload & (DIRTY | AGED);
        BlockMarks marks = BlockMarks::recorded(i, payload);
        size_t block_end = i + (size_t(1) << order);
        size_t taken_end = end < block_end ? end : block_end;
        remove(i, order);
        dirty |= (flags & DIRTY) != 0;
        taking(marks, flags, i, taken_end);
        for_each_aligned_block(taken_end, block_end, [&](size_t b, size_t o) {
          insert(b, o, flags | marks.bits_for(b, o));
        });
        i = block_end;
      }
      if (end > frontier_)
        frontier_ = end;
      return true;
    }

    // A freed block is dirty and young (unless the caller has just replaced
    // its pages); merged with its buddies, it stays young (the merged block
    // holds newly freed pages), and is clean only if every part was.  (Any
    // merge made it dirty: a block a trim decommitted and put back next to
    // a clean buddy, such as a gap the frontier skipped, which is inserted
    // unmerged, became a dirty block of zero pages that the trim left
    // behind it.)  It records its own mark (`marked`: at its first chunk)
    // before its buddies'.
    void dealloc(size_t index, size_t order, bool clean = false, bool marked = false)
    {
      BlockMarks marks;
      if (marked)
        marks.add(index);
      while (order < MAX_ORDER)
      {
        size_t buddy = index ^ (size_t(1) << order);
        uintptr_t payload = 0;
        if (!free_payload_at(buddy, payload) || (payload & ORDER_MASK) != order)
          break;
        marks.add_recorded(buddy, payload);
        remove(buddy, order);
        index &= ~(size_t(1) << order);
        order++;
        clean = clean && (payload & DIRTY) == 0;
      }
      note_overwritten(marks.dropped_overwritten);
      insert(index, order, (clean ? 0 : DIRTY) | marks.bits_for(index, order));
    }

    // A decay's first step: take off the free lists the dirty blocks whose
    // pages go back (all of them, or only the aged ones), and age the dirty
    // blocks that remain.  The blocks taken are tagged Decommitting, so that
    // no other call allocates or merges them, and linked as on a list: to
    // the block before them on theirs, and to the block taken before them
    // (a chain, last taken first).  The first of the chain is returned
    // (NONE for none), and `bytes` is what they hold.  Their marks are
    // compared as they are taken, their pages still resident: a write into
    // a run left free until its decay is seen too.
    uint32_t take_decaying(bool everything, size_t& bytes)
    {
      uint32_t taken = NONE;
      bytes = 0;
      for (size_t o = 0; o <= MAX_ORDER; o++)
      {
        for (uint32_t i = heads_[o]; i != NONE;)
        {
          uint32_t next = next_of(i);
          uintptr_t flags = flags_of(i);
          if ((flags & DIRTY) != 0 && (everything || (flags & AGED) != 0))
          {
            uint32_t prev = prev_of(i);
            size_t end = i + (size_t(1) << o);
            note_overwritten(BlockMarks::recorded(i, tag_payload(at(i).get_owner())).overwritten(i, end));
            remove(i, o);
            at(i).owner.store(make_tag(ChunkKind::Decommitting, o), std::memory_order_relaxed);
            set_links(i, prev, taken);
            taken = i;
            bytes += size_t(1) << (o + config::CHUNK_BITS);
          }
          else if ((flags & DIRTY) != 0)
            at(i).owner.store(
              free_tag(o, (tag_payload(at(i).get_owner()) & ~ORDER_MASK) | AGED),
              std::memory_order_relaxed);
          i = next;
        }
      }
      return taken;
    }

    // The second, without the lock: the pages of the blocks taken go back.
    // Reads only the chain's entries, which no other call touches.
    static void decommit_taken(uint32_t taken)
    {
      for (uint32_t i = taken; i != NONE; i = next_of(i))
        Pal::decommit(pagemap.chunk_address(i), config::CHUNK_SIZE << tag_payload(at(i).get_owner()));
    }

    // The last, under the lock again: the blocks back on the free lists,
    // clean, where they were (behind the same block, taken last first so
    // that neighbours taken together keep their order), as an in-place
    // decay left them.  At the front, requests took them before the blocks
    // freed since, whose pages are resident: 64 slab-sized requests after a
    // decay took 63 such blocks and 1,008 page faults instead of none.  At
    // the back, behind the tails kept for runs to grow into, realloc moved
    // func-api-large's growing buffers 99 times.  A block whose buddy was
    // freed meanwhile merges with it; one that was at the front, or whose
    // block before was allocated meanwhile, goes behind the blocks freed
    // meanwhile, whose pages are resident.
    void put_back_taken(uint32_t taken)
    {
      while (taken != NONE)
      {
        uint32_t next = next_of(taken);
        uint32_t prev = prev_of(taken);
        size_t order = tag_payload(at(taken).get_owner());
        size_t buddy = taken ^ (size_t(1) << order);
        at(taken).set(0, 0); // merged as the upper half, it is no block's head
        if (order < MAX_ORDER && is_free_block(buddy, order))
          dealloc(taken, order, true);
        else
          insert(taken, order, 0, prev != NONE && is_free_block(prev, order) ? prev : last_young_at_front(order));
        taken = next;
      }
    }
  };
} // namespace snmalloc
