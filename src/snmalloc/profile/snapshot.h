#pragma once
// Layer profile, stage "snapshot": a consistent copy of the live samples
// and their aggregation into profile buckets.
//
// Records are copied under each list's lock into memory reserved before the
// lock is taken (the copy never allocates while a lock is held); all the
// rest, aggregation, symbolisation and encoding, happens outside every lock.
// A sample freed concurrently is either in the copy or not; nothing else
// waits for a dump except a free of a sampled object of the list being
// copied.

#include "profiler.h"

#include <vector>

namespace snmalloc::profile
{
  // Every live sample.  Call with the ProfilerGuard held.
  inline std::vector<SampleView> snapshot_live_samples()
  {
    std::vector<SampleView> out;
    sample_lists.for_each([&](SampleList& list) {
      for (;;)
      {
        size_t want = out.size() + list.count.load(std::memory_order_relaxed) + 64;
        if (out.capacity() < want)
          out.reserve(want * 2);
        LockGuard g(list.lock);
        if (out.size() + list.count.load(std::memory_order_relaxed) > out.capacity())
          continue; // grew meanwhile; reserve more outside the lock
        for (SampleRecord* r = list.head; r != nullptr; r = r->next)
          out.push_back(view_of(r));
        return;
      }
    });
    return out;
  }

  // Per stack-table entry: cumulative allocations (from the table) and the
  // live ones (weighted with the interval each was sampled at).
  struct Buckets
  {
    std::vector<const StackEntry*> entries;
    std::vector<ProfileBucket> rows;
  };

  inline Buckets aggregate(const std::vector<SampleView>& live)
  {
    Buckets b;
    stack_table.for_each([&](const StackEntry& e) {
      b.entries.push_back(&e);
      b.rows.push_back(ProfileBucket{
        e.frames, e.depth, e.object_size, e.alloc_objects, e.alloc_bytes, 0, 0,
        e.requested_size});
    });
    for (const SampleView& s : live)
    {
      if (s.stack_id >= b.rows.size())
        continue;
      double w = sample_weight(s.allocated_size, s.interval);
      b.rows[s.stack_id].inuse_objects += w;
      b.rows[s.stack_id].inuse_bytes += w * double(s.allocated_size);
    }
    return b;
  }
} // namespace snmalloc::profile
