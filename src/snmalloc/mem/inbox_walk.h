#pragma once
// Layer mem: the walk of an allocator's inbox, the chains of objects other
// threads freed for it (ds/message_queue.h), handing each object to the
// owner's local free.
//
// It walks LANES chains at a time: each step's loads are independent, so
// their cache misses overlap (one chain at a time took 18% of
// producer-consumer's CPU samples, 83% of them on the load of the next
// link).  The chains are dealt out from the one stack as walkers finish,
// or are the checks build's stacks.  The lanes are unrolled and the
// pagemap and the free's state held in locals, so that all stay in
// registers (the frees' stores could alias the globals): with the lanes an
// array in memory, the walk was 40 instructions an object on
// perf-producer-freer, then 27.  A lane holds its next object's offset in
// the arena, which the test of its link computes anyway and its pagemap
// entry is found from: 25 (perf-larson 1340.4 -> 1339.2 M).  A lane that
// has ended holds ENDED, or any offset past the arena.

#include "../ds/ds.h"

#include <utility>

namespace snmalloc
{
  // `free_one(f, entry)` frees the object f, whose pagemap entry is `entry`;
  // it checks that f is the walker's, which the messages only claim.
  template<typename FreeOne>
  class InboxWalk
  {
    static constexpr size_t LANES = MessageQueue::LANES;
    static constexpr uintptr_t ENDED = ~uintptr_t(0);
    using Lanes = std::make_index_sequence<LANES>;
    static_assert(MessageQueue::STACKS <= LANES, "run() gives each stack a lane");

    const Pagemap map_;
    const FreeOne free_one_;
    uintptr_t lane_[LANES];
    FreeObject* chains_ = nullptr;

    // A link read from the message object `at`: the objects of a message
    // are of many slabs, so each must at least be in the arena (free_one
    // checks the rest).  A link overwritten after the free (with encoded
    // links, any overwrite) points elsewhere.
    SNMALLOC_FAST_PATH FreeObject* message_link(const FreeObject* at, FreeObject* next) const
    {
      if (SNMALLOC_UNLIKELY(!map_.contains(next)))
      {
        if (next != nullptr)
          report_corrupt_link(at);
      }
      return next;
    }

    // Unrolled, as a loop's stores kept the lanes in memory.
    template<size_t... I>
    SNMALLOC_FAST_PATH void end_lanes(std::index_sequence<I...>)
    {
      ((lane_[I] = ENDED), ...);
    }

    // One step of each lane, a lane that has ended taking the next chain;
    // false once every lane has ended and no chain is left.
    template<size_t... I>
    SNMALLOC_FAST_PATH bool walk_lanes(std::index_sequence<I...>)
    {
      // Every lane steps: `|`, not `||`, which would stop at the first.
      return (int(walk_lane(lane_[I])) | ...) != 0;
    }

    SNMALLOC_FAST_PATH bool walk_lane(uintptr_t& lane)
    {
      if (lane >= map_.size)
      {
        if (chains_ == nullptr)
          return false;
        FreeObject* chain = chains_;
        chains_ = message_link(chain, MessageQueue::next_chain(chain));
        lane = map_.offset_of(chain);
      }
      walk_busy_lane(lane);
      return true;
    }

    template<size_t... I>
    SNMALLOC_FAST_PATH bool all_busy(std::index_sequence<I...>) const
    {
      return ((lane_[I] < map_.size) && ...);
    }

    // The usual round, every lane busy, as long as none ends: no lane is
    // tested but by its link (2 instructions an object less).
    template<size_t... I>
    SNMALLOC_FAST_PATH bool walk_busy_lanes(std::index_sequence<I...>)
    {
      return (walk_busy_lane(lane_[I]) && ...);
    }

    // Free the lane's object and step to the next; false if none is next.
    // The link is read before the free overwrites it, and checked as
    // message_link does after, where its one compare is also the test of
    // the loop.
    SNMALLOC_FAST_PATH bool walk_busy_lane(uintptr_t& lane)
    {
      auto* f = reinterpret_cast<FreeObject*>(map_.base + lane);
      FreeObject* next = f->next_relaxed();
      free_one_(f, map_.entry_at(lane));
      lane = map_.offset_of(next);
      if (SNMALLOC_LIKELY(lane < map_.size))
        return true;
      if (next != nullptr)
        report_corrupt_link(f);
      return false;
    }

  public:
    SNMALLOC_FAST_PATH InboxWalk(const Pagemap& map, const FreeOne& free_one)
    : map_(map), free_one_(free_one)
    {
      end_lanes(Lanes{});
    }

    // Take every message waiting in `queue` and free its objects.
    SNMALLOC_FAST_PATH void run(MessageQueue& queue)
    {
      if constexpr (MessageQueue::CHAINS_APART)
        chains_ = queue.take_all();
      else
      {
        for (size_t i = 0; i < MessageQueue::STACKS; i++)
          lane_[i] = map_.offset_of(queue.take_all(i)); // nullptr: past the arena
      }
      while (walk_lanes(Lanes{}))
      {
        if (all_busy(Lanes{}))
        {
          while (walk_busy_lanes(Lanes{}))
            ;
        }
      }
    }
  };
} // namespace snmalloc
