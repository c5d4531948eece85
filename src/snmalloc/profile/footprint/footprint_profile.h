#pragma once
// Layer profile/footprint: the footprint profile's rows, which add up to the
// process's resident memory:
//
//   a site's row      its sampled objects, each weighted as in the heap
//                     profile and counted by its resident share (a large
//                     object touched on half its pages counts half)
//   snmalloc: ...     the allocator's own resident memory (arena_residency.h,
//                     the pagemap, the profiler's regions), and the live
//                     objects that the samples' estimate missed: the exact
//                     resident bytes of objects out less the estimate, so
//                     the rows add up (objects waiting in threads' fast
//                     lists, and the sampling error, either sign)
//   [kind]            the rest of the process (smaps_rows.h)
//
// slab_waste_space: each sizeclass's free slots in partly used slabs, shared
// among the sites of that class by their estimated resident bytes.

#include "../samples/live_samples.h"
#include "arena_residency.h"
#include "footprint_encoder.h"
#include "smaps_rows.h"

#include <map>
#include <string>
#include <vector>

namespace snmalloc::profile
{
  struct Footprint
  {
    std::vector<FootprintRow> rows;
    size_t vm_rss = 0; // read right after the rows
  };

  namespace footprint_detail
  {
    // Resident bytes of the sampled objects, by what holds them.
    struct SampledObjects
    {
      double estimate = 0; // weighted, all sites
      std::array<double, NUM_SMALL_CLASSES> class_estimate{};
      size_t in_pool_slabs = 0, in_sampled_runs = 0, in_guarded_slots = 0;

      void add_held(uintptr_t address, size_t bytes)
      {
        uintptr_t owner = pagemap.entry_of(reinterpret_cast<void*>(address)).get_owner();
        if (is_tag_of(owner, ChunkKind::Sampled) && tag_payload(owner) != 0)
          in_sampled_runs += bytes;
        else if (pagemap.entry_of(reinterpret_cast<void*>(address)).get_meta() != 0)
          in_pool_slabs += bytes;
        else
          in_guarded_slots += bytes;
      }
    };

    inline void add_named(std::vector<FootprintRow>& rows, std::string name, double bytes)
    {
      if (bytes == 0)
        return;
      FootprintRow row;
      row.name = std::move(name);
      row.resident_bytes = bytes;
      rows.push_back(std::move(row));
    }

    inline double held(size_t total, size_t objects)
    {
      return total > objects ? double(total - objects) : 0;
    }

    // One row per site with live samples; their figures in `sampled`.
    inline std::vector<FootprintRow> site_rows(const ArenaResidency& arena, SampledObjects& sampled)
    {
      std::vector<FootprintRow> sites;
      stack_table.for_each([&](const SiteEntry& e) {
        FootprintRow row;
        row.frames = e.stack->frames;
        row.depth = e.stack->depth;
        row.object_size = e.object_size;
        sites.push_back(row);
      });
      for (const SampleView& s : snapshot_live_samples())
      {
        if (s.site_id >= sites.size())
          continue;
        double fraction = arena.pages.fraction_in(s.address, s.address + s.allocated_size);
        size_t own = size_t(fraction * double(s.allocated_size));
        double estimate = sample_weight(s.mode, s.allocated_size, s.interval) * double(own);
        sites[s.site_id].resident_bytes += estimate;
        sampled.estimate += estimate;
        if (s.allocated_size <= config::MAX_SMALL_SIZE)
          sampled.class_estimate[size_to_sizeclass(s.allocated_size)] += estimate;
        sampled.add_held(s.address, own);
      }
      std::vector<FootprintRow> rows;
      for (FootprintRow& row : sites)
      {
        if (row.resident_bytes == 0)
          continue;
        if (row.object_size <= config::MAX_SMALL_SIZE)
        {
          sizeclass_t sc = size_to_sizeclass(row.object_size);
          if (sampled.class_estimate[sc] > 0)
            row.slab_waste_bytes = double(arena.free_slot_bytes[sc]) * row.resident_bytes /
              sampled.class_estimate[sc];
        }
        rows.push_back(row);
      }
      return rows;
    }

    inline void add_allocator_rows(
      std::vector<FootprintRow>& rows, const ArenaResidency& a, const SampledObjects& sampled,
      size_t pagemap_bytes)
    {
      double exact_live = double(a.live_bytes + sampled.in_pool_slabs + sampled.in_sampled_runs +
                                 sampled.in_guarded_slots);
      add_named(
        rows, "snmalloc: live objects off the samples' estimate: fast lists, sampling error",
        exact_live - sampled.estimate);
      for (sizeclass_t sc = 0; sc < NUM_SMALL_CLASSES; sc++)
      {
        std::string objects = std::to_string(sizeclass_to_size(sc)) + " B objects";
        add_named(rows, "snmalloc: free slots in partly used slabs, " + objects, double(a.free_slot_bytes[sc]));
        add_named(rows, "snmalloc: empty slabs kept for reuse, " + objects, double(a.empty_slab_bytes[sc]));
      }
      add_named(rows, "snmalloc: freed chunks still resident: slabs, large runs", double(a.free_block_bytes));
      add_named(rows, "snmalloc: metadata: slab descriptors, allocators", double(a.meta_bytes));
      add_named(rows, "snmalloc: pagemap", double(pagemap_bytes));
      add_named(rows, "snmalloc: profiler pool: sample records, free blocks", held(a.pool_slab_bytes, sampled.in_pool_slabs));
      add_named(rows, "snmalloc: large-run tails of sampled objects", held(a.sampled_run_bytes, sampled.in_sampled_runs));
      add_named(rows, "snmalloc: guarded slots", held(a.guarded_slot_bytes, sampled.in_guarded_slots));
      add_named(rows, "snmalloc: zero-size slots", double(a.zero_size_bytes));
      add_named(rows, "snmalloc: chunks without a pagemap entry", double(a.untagged_bytes));
    }

    // The pagemap's entries for the carved arena: the rest is never written.
    struct Range
    {
      uintptr_t start, end;
    };

    inline Range pagemap_range(const ArenaResidency& a)
    {
      uintptr_t start = reinterpret_cast<uintptr_t>(pagemap.entries);
      size_t bytes = (a.carved_bytes >> config::CHUNK_BITS) * sizeof(PagemapEntry);
      return {start, start + bytes};
    }

    inline size_t resident_overlap(Range r, uintptr_t start, uintptr_t end)
    {
      uintptr_t from = r.start > start ? r.start : start;
      uintptr_t to = r.end < end ? r.end : end;
      return from < to ? resident_bytes(from, to - from) : 0;
    }
  } // namespace footprint_detail

  // Not sampled while it runs: the walk over the stack table holds its
  // lock, which a sampled allocation would take again.
  inline Footprint read_footprint()
  {
    using namespace footprint_detail;
    ProfilerGuard guard;
    Footprint f;
    ArenaResidency arena = read_arena_residency();
    SampledObjects sampled;
    f.rows = site_rows(arena, sampled);
    Range pagemap_part = pagemap_range(arena);
    add_allocator_rows(
      f.rows, arena, sampled, resident_bytes(pagemap_part.start, pagemap_part.end - pagemap_part.start));

    std::vector<Range> regions;
    std::map<std::string, size_t> region_bytes;
    profiler_regions.for_each([&](const ProfilerRegion& r) {
      regions.push_back({r.base, r.base + r.bytes});
      region_bytes[std::string("snmalloc: profiler ") + r.what] += resident_bytes(r.base, r.bytes);
    });
    for (const auto& [name, bytes] : region_bytes)
      add_named(f.rows, name, double(bytes));

    Range arena_part{arena.base, arena.base + arena.carved_bytes};
    for (const MappingRow& m : read_mapping_rows([&](uintptr_t start, uintptr_t end) {
           uintptr_t from = start > arena_part.start ? start : arena_part.start;
           uintptr_t to = end < arena_part.end ? end : arena_part.end;
           size_t counted = from < to ? arena.pages.bytes_in(from, to) : 0;
           counted += resident_overlap(pagemap_part, start, end);
           for (const auto& region : regions)
             counted += resident_overlap(region, start, end);
           return counted;
         }))
      add_named(f.rows, m.name, double(m.resident_bytes));
    f.vm_rss = read_vm_rss();
    return f;
  }
} // namespace snmalloc::profile
