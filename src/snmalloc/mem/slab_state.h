#pragma once
// Layer mem: the states of a slab, and what its descriptor's `needed`
// (mem/slab_meta.h) counts down in each.
//
// Refill takes a slab's whole free list at once and puts the slab to sleep
// once none of its objects is left untouched: it is on no list, and
// `needed` counts down the frees to its next event:
//   Awake:   on its class's available list; `needed` counts the objects
//            still out, so that reaching zero means the slab is entirely
//            free and can be released
//            free objects = capacity - needed        (untouched included)
//   Asleep:  wakes after wake_threshold frees
//            free objects = wake_threshold - needed  (untouched = 0)
//   Watched: none free, needed = 1: its first free makes it Dozing
//   Dozing:  on its class's dozing queue, as Asleep otherwise; a refill
//            that finds no awake slab may wake it early
// Waking at the threshold, not at every free, keeps refills few and their
// batches large.  A slab falls asleep Watched while its class grows (its
// allocator took a new slab within the class's last 16 threshold wakes):
// then a heap that frees a little in many slabs reuses those objects
// rather than grow (freeing every fifth 64-byte object of 256 MiB, then
// allocating as many again: +51 MiB of resident memory with every slab
// Asleep, +0 so, as glibc, jemalloc, mimalloc and tcmalloc).  Not watched
// while the class holds steady, when its slabs wake at their threshold:
// watching them all, perf-random-replace's slabs needed two calls of the
// slow path a sleep instead of one (+3.6% instructions).

#include "../ds/ds.h"

namespace snmalloc
{
  // See the top of this file.
  enum class SlabState : uint8_t
  {
    Awake,
    Asleep,
    Watched,
    Dozing
  };

  // Every state but Awake: the slab is on no available list, and `needed`
  // counts the frees to its next event, not the objects out.
  constexpr bool is_sleeping(SlabState state)
  {
    return state != SlabState::Awake;
  }

  // How a slab of a class falls asleep: Watched while the class grows, else
  // Asleep until its wake threshold.  Its owner keeps one per class, so
  // that a refill copies it and tests nothing.
  struct SleepPlan
  {
    uint32_t needed;
    SlabState state;

    static SleepPlan watched()
    {
      return {1, SlabState::Watched};
    }

    static constexpr SleepPlan until_threshold(sizeclass_t sc)
    {
      return {sizeclasses.wake_threshold[sc], SlabState::Asleep};
    }
  };
} // namespace snmalloc
