#pragma once
// Layer mem: the profiler policy that CoreAlloc is parameterised by, and its
// no-op default used when SNMALLOC_PROFILE is off.
//
// The profiler enters the allocator only through these named hooks, all on
// slow paths (profile/profiler.h is the real implementation):
//   CoreState::sample_due(core, sc)      refill: is a sample point pending in sc?
//                                        (inline: one compare in the common case)
//   CoreState::alloc_at_sample_point(..) alloc_sample_due: serve the sampled
//                                        allocation
//   CoreState::split(core, sc, batch)    refill: count the batch, hold back
//                                        objects past the next sample point
//                                        (inline: one subtract in the common case)
//   CoreState::alloc_large(..)           large alloc: count down, maybe sample
//   CoreState::flush(core)               thread exit: give held objects back
//   entered_slow_path(return_address)    alloc_slow: where the stack is cut
//   entered_sample_path(return_address, frame)
//                                        alloc_sample_due: the same, and the
//                                        hook's frame, where a walk may start
//   CoreState::grew_in_place(..)         realloc grew a large run in place:
//                                        count the bytes, maybe sample it
//   dealloc_sampled(p)                   free of a profile-pool object
//   sampled_object(p)                    the profile-pool object holding p
//   own_bytes()                          statistics: the profiler's own memory
//   samples_dropped()                    statistics: samples lost to out of memory
//   recount_pool_slabs()                 statistics: the profile pool's awake slabs
// The malloc and free fast paths call none of them.

#include "slab_meta.h"

namespace snmalloc
{
  // An object as malloc_usable_size and the checks build's bounds see it:
  // where it starts and the bytes it gives (size 0: no such object).
  struct ObjectExtent
  {
    uintptr_t start = 0;
    size_t size = 0;
  };

  struct NoProfiler
  {
    static constexpr bool enabled = false;

    struct CoreState
    {
      static void grew_in_place(void*, size_t, size_t, size_t, bool) {}

      template<typename Core>
      void flush(Core&)
      {}
    };

    static void entered_slow_path(void*) {}
    static void entered_sample_path(void*, void*) {}
    static void prefork() {}
    static void postfork() {}

    static void dealloc_sampled(void*)
    {
      report_fatal("free: profile-pool pointer in a build without profiling");
    }

    static ObjectExtent sampled_object(const void*)
    {
      return {};
    }

    static bool starts_sample(const void*)
    {
      return false;
    }

    static size_t own_bytes()
    {
      return 0;
    }

    static uint64_t samples_dropped()
    {
      return 0;
    }

    static void recount_pool_slabs() {}
  };
} // namespace snmalloc
