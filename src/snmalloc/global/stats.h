#pragma once
// Layer global: snmalloc::stats(), the figures of snmalloc_stats.h summed
// over every allocator (mem/heap_counts.h says what they mean), and
// snmalloc::trim(), which gives the heap's free memory back.

#include "../snmalloc_stats.h"
#include "thread_alloc.h"

namespace snmalloc
{
  using Stats = struct ::snmalloc_stats;

  static_assert(SNMALLOC_STATS_SIZECLASSES == NUM_SMALL_CLASSES);

  namespace detail
  {
    // Remote frees waiting for the calling thread's allocator or an idle
    // one, and the calling thread's batches for others, are handled first,
    // and those allocators' awake slabs recounted: a thread that freed, or
    // one that exited, is then seen as it stands.
    inline void settle_remote_frees()
    {
      if (Alloc* core = local_cache.core)
      {
        core->handle_messages();
        core->post_remote_frees();
        core->recount_available_slabs();
      }
      alloc_pool.for_each_idle([](Alloc& core) {
        core.handle_messages();
        core.recount_available_slabs();
      });
      Profiler::recount_pool_slabs();
    }

    inline uint64_t non_negative(int64_t v)
    {
      return v > 0 ? uint64_t(v) : 0;
    }
  } // namespace detail

  // Give back to the OS what the heap holds free: the empty slabs the
  // calling thread's allocator and the idle ones keep for their next
  // refills, then every free chunk's pages, the checks build's quarantined
  // runs' too (they stay inaccessible), now rather than at their decay.
  // Not the free objects of slabs still in use, nor other threads' empty
  // slabs.  The bytes decommitted.
  inline size_t trim() noexcept
  {
    auto release = [](Alloc& core) {
      core.handle_messages();
      core.release_empty_slabs();
    };
    if (Alloc* core = local_cache.core)
      release(*core);
    alloc_pool.for_each_idle(release);
    return backend.release_free_pages();
  }

  inline Stats stats() noexcept
  {
    detail::settle_remote_frees();
    Stats s{};
    s.sizeclass_count = NUM_SMALL_CLASSES;
    int64_t objects[NUM_SMALL_CLASSES] = {};
    int64_t slabs[NUM_SMALL_CLASSES] = {};
    HeapCounts::for_each([&](const HeapCounts& c) {
      for (sizeclass_t sc = 0; sc < NUM_SMALL_CLASSES; sc++)
      {
        objects[sc] += c.objects(sc);
        slabs[sc] += c.slabs(sc);
      }
    });
    for (sizeclass_t sc = 0; sc < NUM_SMALL_CLASSES; sc++)
    {
      auto& out = s.sizeclasses[sc];
      out.object_size = sizeclass_to_size(sc);
      out.live_objects = detail::non_negative(objects[sc]);
      out.slabs = detail::non_negative(slabs[sc]);
      out.slab_bytes = out.slabs << sizeclasses.slab_bits[sc];
      s.small_live_bytes += out.live_objects * out.object_size;
      s.slab_bytes += out.slab_bytes;
    }
    s.large_live_bytes = detail::non_negative(heap_totals.large_bytes());
    s.large_runs = detail::non_negative(heap_totals.large_runs());
    // Guarded objects are small ones in slots of their own, which the
    // backend counts as in use, guards and all (25 MiB at guard=100).
    GuardedBytes guarded = Profiler::guarded_bytes();
    s.small_live_bytes += guarded.live;
    s.live_bytes = s.small_live_bytes + s.large_live_bytes;
    // The peak is kept from running totals that other threads move while
    // the classes above are summed: never report it below the sum.
    s.peak_live_bytes = detail::non_negative(heap_totals.peak_live_bytes());
    if (s.peak_live_bytes < s.live_bytes)
      s.peak_live_bytes = s.live_bytes;
    Backend::Usage u = backend.usage();
    size_t heap = u.in_use_bytes + u.dirty_free_bytes;
    s.resident_bytes = (heap > guarded.reserved ? heap - guarded.reserved : 0) + guarded.resident;
    s.meta_bytes = u.meta_bytes;
    s.profiler_bytes = Profiler::own_bytes();
    s.profile_samples_dropped = Profiler::samples_dropped();
    return s;
  }
} // namespace snmalloc
