#pragma once
// Layer mem: the profiler policy that CoreAlloc is parameterised by, and its
// no-op default used when SNMALLOC_PROFILE is off.
//
// The profiler enters the allocator only through these named hooks, all on
// slow paths (profile/profiler.h is the real implementation;
// profiler_contract.h checks at compile time that a policy has each):
//   enabled                              constexpr: is profiling compiled in
//   CoreState::sample_due(core, sc)      refill: is a sample point pending in sc?
//                                        (inline: one compare in the common case)
//   CoreState::counted_before_point(sc, n)
//                                        usual refill: count n objects if they
//                                        come before the next sample point
//                                        (inline: a compare and a subtract)
//   CoreState::split(core, sc, batch)    refill: count the batch, hold back
//                                        objects past the next sample point
//                                        (inline: one subtract in the common case)
//   CoreState::alloc_at_sample_point(..) alloc_sample_due: serve the sampled
//                                        allocation
//   CoreState::alloc_large(..)           large alloc: count down, maybe sample
//   CoreState::grew_in_place(..)         realloc grew a large run in place:
//                                        count the bytes, maybe sample it
//   CoreState::flush(core)               thread exit: give held objects back
//   CoreState::held_objects(sc)          census: the batch held back in sc
//   entered_slow_path(return_address)    realloc's growth in place: where the
//                                        stack is cut
//   entered_sample_path(return_address, frame)
//                                        alloc_sample_due, alloc_large_sampling:
//                                        the same, and the hook's frame, where
//                                        a walk may start
//   dealloc_sampled(p)                   free of a profile-pool object
//   sampled_object(p)                    the profile-pool object holding p
//   starts_sample(p)                     free checks: is p a sampled object's start
//   own_bytes()                          statistics: the profiler's own memory
//   samples_dropped()                    statistics: samples lost to out of memory
//   guarded_bytes()                      statistics: guarded objects, outside
//                                        the classes' and large runs' counts
//   recount_pool_slabs()                 statistics: the profile pool's awake slabs
//   visit_samples(visitor)               census: every live sampled object
//   push_label(key, value), pop_label()  the program sets allocation labels
//                                        (global/labels.h); 0 or an errno
//   AskedFor(rounded, asked)             alloc_aligned, while it serves `rounded`
//                                        bytes for a request of `asked`
//   prefork(), postfork(),               fork: the profiler's locks held across it;
//   postfork_child()                     the child's samplers reseeded
// The malloc and free fast paths call none of them.  NoProfiler defines
// each as a no-op that the compiler removes.

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

  // Guarded sampled objects (profile/guard/): their usable bytes, the pages
  // they hold, and the address space reserved for their slots and guards,
  // which the backend counts as in use although it is never resident.
  struct GuardedBytes
  {
    size_t live = 0;
    size_t resident = 0;
    size_t reserved = 0;
  };

  // A census's visitor: a C function and its argument (snmalloc_stats.h's
  // snmalloc_heap_walk), called with each live object and its usable size.
  struct HeapVisitor
  {
    void (*visit)(void* object, size_t usable_size, void* arg);
    void* arg;

    void operator()(void* object, size_t usable_size) const
    {
      visit(object, usable_size, arg);
    }
  };

  struct NoProfiler
  {
    static constexpr bool enabled = false;

    struct CoreState
    {
      template<typename Core>
      static bool sample_due(Core&, sizeclass_t)
      {
        return false;
      }

      static constexpr bool counted_before_point(sizeclass_t, size_t)
      {
        return true;
      }

      template<typename Core>
      static Batch split(Core&, sizeclass_t, Batch b)
      {
        return b;
      }

      template<typename Core>
      static void* alloc_at_sample_point(Core&, FreeObject*&, sizeclass_t, size_t, size_t)
      {
        return nullptr;
      }

      template<typename Core>
      static void* alloc_large(Core&, size_t, size_t, bool)
      {
        return nullptr;
      }

      static void grew_in_place(void*, size_t, size_t, size_t, bool) {}

      template<typename Core>
      static void flush(Core&)
      {}

      static const FreeObject* held_objects(sizeclass_t)
      {
        return nullptr;
      }
    };

    struct AskedFor
    {
      AskedFor(size_t, size_t) {}
    };

    static void entered_slow_path(void*) {}
    static void entered_sample_path(void*, void*) {}
    static void prefork() {}
    static void postfork() {}
    static void postfork_child() {}

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

    static GuardedBytes guarded_bytes()
    {
      return {};
    }

    static void recount_pool_slabs() {}

    static void visit_samples(HeapVisitor) {}

    // Without profiling, labels are accepted and kept nowhere.
    static int push_label(const char*, const char*)
    {
      return 0;
    }

    static int pop_label()
    {
      return 0;
    }
  };
} // namespace snmalloc
