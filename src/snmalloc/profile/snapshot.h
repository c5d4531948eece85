#pragma once
// Layer profile, stage "snapshot": the aggregation of a copy of the live
// samples (live_samples.h) into profile buckets, outside every lock.

#include "profiler.h"
#include "live_samples.h"

#include <unordered_map>
#include <vector>

namespace snmalloc::profile
{
  // Per stack-table site, its cumulative allocations (from the table);
  // per entry and allocating thread, the live samples (weighted with the
  // interval each was sampled at), labelled with the thread.  The
  // cumulative counts are not kept per thread: keyed by thread, the table
  // grew with every thread a program ever ran (a thread-churning test's
  // dumps took minutes), so alloc_* rows carry no thread label.
  struct Buckets
  {
    std::vector<ProfileBucket> rows;
  };

  inline Buckets aggregate(const std::vector<SampleView>& live)
  {
    Buckets b;
    stack_table.for_each([&](const SiteEntry& e) {
      b.rows.push_back(ProfileBucket{
        e.stack->frames, e.stack->depth, e.object_size, e.alloc_objects, e.alloc_bytes, 0, 0,
        e.requested_size});
    });
    size_t entries = b.rows.size();
    std::unordered_map<uint64_t, size_t> live_row; // (site, thread) -> row
    for (const SampleView& s : live)
    {
      if (s.site_id >= entries)
        continue;
      auto [it, inserted] =
        live_row.try_emplace(uint64_t(s.site_id) << 32 | s.thread_id, b.rows.size());
      if (inserted)
      {
        const ProfileBucket& entry = b.rows[s.site_id];
        b.rows.push_back(ProfileBucket{
          entry.frames, entry.depth, entry.object_size, 0, 0, 0, 0, entry.requested_size,
          s.thread_id});
      }
      double w = sample_weight(s.mode, s.allocated_size, s.interval);
      b.rows[it->second].inuse_objects += w;
      b.rows[it->second].inuse_bytes += w * double(s.allocated_size);
    }
    return b;
  }
} // namespace snmalloc::profile
