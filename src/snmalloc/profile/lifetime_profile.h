#pragma once
// Layer profile, stage "snapshot": the lifetime profile's rows.  The frees
// come from the sites' histograms (samples/lifetime_stats.h), the objects
// still alive from a copy of the live samples, aged at the copy; both
// weighted as the heap profile is, so a site's counts estimate the
// program's.  The difference of two sets of freed rows is the frees of a
// window (/debug/pprof/lifetimes?seconds=N).

#include "pprof/lifetime_encoder.h"
#include "profiler.h"
#include "samples/live_samples.h"

#include <unordered_map>
#include <vector>

namespace snmalloc::profile
{
  namespace lifetime_detail
  {
    struct SiteStack
    {
      const uintptr_t* frames;
      uint32_t depth;
      uint64_t object_size;
      uint32_t labels;
    };

    inline std::vector<SiteStack> site_stacks()
    {
      std::vector<SiteStack> sites;
      stack_table.for_each([&](const SiteEntry& e) {
        sites.push_back({e.stack->frames, e.stack->depth, e.object_size, e.labels});
      });
      return sites;
    }

    // (site, bucket, freeing thread, live) as one number: the rows of one
    // profile are unique by it, and a site's stack and size follow from it.
    inline uint64_t row_key(uint32_t site, size_t bucket, bool other_thread, bool live)
    {
      return uint64_t(site) << 8 | bucket << 2 | size_t(other_thread) << 1 | size_t(live);
    }
  } // namespace lifetime_detail

  // Rows keyed for lifetime_delta: key (row_key) -> row.
  using LifetimeRows = std::unordered_map<uint64_t, LifetimeRow>;

  // Every site's frees so far, one row per non-empty cell.  Call with the
  // ProfilerGuard held.
  inline LifetimeRows freed_lifetime_rows()
  {
    using namespace lifetime_detail;
    std::vector<SiteStack> sites = site_stacks();
    // Copied out under the table's lock, expanded into rows after it.
    std::vector<std::pair<uint32_t, SiteLifetimes>> counted;
    lifetime_table.for_each([&](uint32_t site, const SiteLifetimes& s) {
      if (site < sites.size())
        counted.emplace_back(site, s);
    });
    LifetimeRows rows;
    for (const auto& [site, s] : counted)
    {
      const SiteStack& at = sites[site];
      for (bool other : {false, true})
      {
        for (size_t b = 0; b < LIFETIME_BUCKETS; b++)
        {
          const LifetimeCell& c = s.cells[other][b];
          if (c.objects == 0)
            continue;
          rows.emplace(
            row_key(site, b, other, false),
            LifetimeRow{
              at.frames, at.depth, at.object_size, uint32_t(b), false, other, c.objects,
              c.lifetime_ns, at.labels});
        }
      }
    }
    return rows;
  }

  // The objects alive now, per site and age bucket, added to `rows`.  Call
  // with the ProfilerGuard held.
  inline void add_live_lifetime_rows(LifetimeRows& rows)
  {
    using namespace lifetime_detail;
    std::vector<SampleView> live = snapshot_live_samples();
    std::vector<SiteStack> sites = site_stacks();
    int64_t now = Pal::precise_monotonic_ns();
    for (const SampleView& s : live)
    {
      if (s.site_id >= sites.size())
        continue;
      int64_t age = now > s.birth_ns ? now - s.birth_ns : 0;
      size_t b = lifetime_bucket(age);
      const SiteStack& at = sites[s.site_id];
      auto [it, inserted] = rows.try_emplace(
        row_key(s.site_id, b, false, true),
        LifetimeRow{
          at.frames, at.depth, at.object_size, uint32_t(b), true, false, 0, 0, at.labels});
      double w = sample_weight(s.mode, s.allocated_size, s.interval);
      it->second.objects += w;
      it->second.total_ns += w * double(age);
    }
  }

  // after - before, for rows of frees (cumulative): the frees between the
  // two.  Rows left with no objects are dropped.
  inline LifetimeRows lifetime_delta(const LifetimeRows& before, LifetimeRows after)
  {
    for (const auto& [key, row] : before)
    {
      auto it = after.find(key);
      if (it == after.end())
        continue; // a site's counts never go down
      it->second.objects -= row.objects;
      it->second.total_ns -= row.total_ns;
      if (round_of(it->second.objects) == 0)
        after.erase(it);
    }
    return after;
  }
} // namespace snmalloc::profile
