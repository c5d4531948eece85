#pragma once
// Layer profile, stage "snapshot": the aggregation of a copy of the live
// samples (live_samples.h) into profile buckets, outside every lock.

#include "pprof/pprof_encoder.h"
#include "profiler.h"
#include "samples/live_samples.h"

#include <unordered_map>
#include <vector>

namespace snmalloc::profile
{
  // Per stack-table site, its cumulative allocations (from the table);
  // per site, requested size and allocating thread, the live samples
  // (weighted with the interval each was sampled at), labelled with the
  // thread and their own requested size.  The
  // cumulative counts are not kept per thread: keyed by thread, the table
  // grew with every thread a program ever ran (a thread-churning test's
  // dumps took minutes), so alloc_* rows carry no thread label.
  struct Buckets
  {
    std::vector<ProfileBucket> rows;
  };

  struct LiveRowKey
  {
    uint64_t site_and_thread;
    uint64_t requested_size;

    bool operator==(const LiveRowKey& o) const
    {
      return site_and_thread == o.site_and_thread && requested_size == o.requested_size;
    }

    struct Hash
    {
      size_t operator()(const LiveRowKey& k) const
      {
        return std::hash<uint64_t>()(k.site_and_thread * 0x9e3779b97f4a7c15ULL ^ k.requested_size);
      }
    };
  };

  inline Buckets aggregate(const std::vector<SampleView>& live)
  {
    Buckets b;
    stack_table.for_each([&](const SiteEntry& e) {
      b.rows.push_back(ProfileBucket{
        e.stack->frames, e.stack->depth, e.object_size, e.alloc_objects, e.alloc_bytes, 0, 0,
        e.requested_size, 0, e.labels});
    });
    size_t entries = b.rows.size();
    // (site, thread, requested size) -> row
    std::unordered_map<LiveRowKey, size_t, LiveRowKey::Hash> live_row;
    for (const SampleView& s : live)
    {
      if (s.site_id >= entries)
        continue;
      auto [it, inserted] = live_row.try_emplace(
        LiveRowKey{uint64_t(s.site_id) << 32 | s.thread_id, s.requested_size}, b.rows.size());
      if (inserted)
      {
        const ProfileBucket& entry = b.rows[s.site_id];
        b.rows.push_back(ProfileBucket{
          entry.frames, entry.depth, entry.object_size, 0, 0, 0, 0, s.requested_size,
          s.thread_id, entry.labels});
      }
      double w = sample_weight(s.mode, s.allocated_size, s.interval);
      b.rows[it->second].inuse_objects += w;
      b.rows[it->second].inuse_bytes += w * double(s.allocated_size);
    }
    return b;
  }
} // namespace snmalloc::profile
