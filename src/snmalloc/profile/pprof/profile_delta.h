#pragma once
// Layer profile/pprof, for the HTTP endpoint: the difference of two profiles, for
// /debug/pprof/heap?seconds=N, as Go's net/http/pprof computes it (the
// first profile scaled by -1 and merged into the second): rows are matched
// on everything the encoder writes for a row other than its values, the
// stack's return addresses and the labels bytes, requested, thread and the
// allocation labels' set.
// So a live row (per site, requested size and allocating thread, with a
// thread label) is matched with the same thread's row, and a cumulative
// row (per site, no thread label) with the site's whatever its requested
// label: a site's requested size becomes unknown once a second size is
// asked there, and the row takes the later profile's.  Values subtract; a
// row only in the first profile comes back negated; rows whose four values
// all come to zero are left out, as pprof's merge leaves them out.
//
// Both profiles' frames point into the stack table, whose entries are never
// freed, so the first profile's rows stay valid until the second is taken.

#include "pprof_encoder.h"

#include <unordered_map>
#include <vector>

namespace snmalloc::profile
{
  namespace delta_detail
  {
    struct RowKey
    {
      const ProfileBucket* row;

      bool operator==(const RowKey& o) const
      {
        const ProfileBucket& a = *row;
        const ProfileBucket& b = *o.row;
        return a.depth == b.depth && a.object_size == b.object_size &&
          a.thread_id == b.thread_id && a.labels == b.labels &&
          (a.thread_id == 0 || a.requested_size == b.requested_size) &&
          (a.frames == b.frames ||
           std::equal(a.frames, a.frames + a.depth, b.frames));
      }
    };

    struct RowKeyHash
    {
      size_t operator()(const RowKey& k) const
      {
        const ProfileBucket& r = *k.row;
        // Cumulative rows (thread 0) match whatever their requested size.
        uint64_t requested = r.thread_id == 0 ? 0 : r.requested_size;
        uint64_t h = r.object_size * 0x9e3779b97f4a7c15ULL ^ requested ^
          (r.thread_id << 40) ^ r.depth ^ uint64_t(r.labels) << 20;
        for (uint32_t i = 0; i < r.depth; i++)
          h = (h ^ r.frames[i]) * 0x100000001b3ULL;
        return size_t(h ^ (h >> 29));
      }
    };

    inline bool is_zero(const ProfileBucket& r)
    {
      // The encoder rounds each value to an integer.
      return round_of(r.alloc_objects) == 0 && round_of(r.alloc_bytes) == 0 &&
        round_of(r.inuse_objects) == 0 && round_of(r.inuse_bytes) == 0;
    }
  } // namespace delta_detail

  // after - before, row by row.
  inline std::vector<ProfileBucket>
  profile_delta(const std::vector<ProfileBucket>& before, const std::vector<ProfileBucket>& after)
  {
    using namespace delta_detail;
    std::unordered_map<RowKey, size_t, RowKeyHash> index; // row -> position in out
    std::vector<ProfileBucket> out;
    out.reserve(after.size() + before.size());
    for (const ProfileBucket& r : after)
    {
      auto [it, inserted] = index.try_emplace(RowKey{&r}, out.size());
      if (inserted)
      {
        out.push_back(r);
        continue;
      }
      ProfileBucket& sum = out[it->second]; // a repeated key: pprof adds them
      sum.alloc_objects += r.alloc_objects;
      sum.alloc_bytes += r.alloc_bytes;
      sum.inuse_objects += r.inuse_objects;
      sum.inuse_bytes += r.inuse_bytes;
    }
    // `out` grows below, so keys must not point into it: they point into
    // `after` and `before`, which stay put.
    for (const ProfileBucket& r : before)
    {
      auto [it, inserted] = index.try_emplace(RowKey{&r}, out.size());
      if (inserted)
      {
        ProfileBucket negated = r;
        negated.alloc_objects = 0;
        negated.alloc_bytes = 0;
        negated.inuse_objects = 0;
        negated.inuse_bytes = 0;
        out.push_back(negated);
      }
      ProfileBucket& d = out[it->second];
      d.alloc_objects -= r.alloc_objects;
      d.alloc_bytes -= r.alloc_bytes;
      d.inuse_objects -= r.inuse_objects;
      d.inuse_bytes -= r.inuse_bytes;
    }
    std::vector<ProfileBucket> kept;
    kept.reserve(out.size());
    for (const ProfileBucket& r : out)
    {
      if (!is_zero(r))
        kept.push_back(r);
    }
    return kept;
  }
} // namespace snmalloc::profile
