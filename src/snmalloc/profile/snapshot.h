#pragma once
// Layer profile, stage "snapshot": the aggregation of a copy of the live
// samples (live_samples.h) into profile buckets, outside every lock.

#include "profiler.h"
#include "live_samples.h"

#include <vector>

namespace snmalloc::profile
{
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
        e.requested_size, e.thread_id});
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
