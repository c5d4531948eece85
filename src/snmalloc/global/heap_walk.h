#pragma once
// Layer global: the heap census, snmalloc::heap_walk and C's
// snmalloc_heap_walk (snmalloc_stats.h says what it promises).
//
// Which objects.  A thread's allocator's free lists are written by that
// thread alone, without atomics, and its fast lists are in its TLS: no
// other thread may read them while it runs, and stopping it would cost
// the fast paths a test.  So the walk covers the small objects of the
// allocators no running thread holds while it runs: the calling thread's
// own and the idle ones (of threads that exited, whose objects outlive
// them), under the pool lock so that none is taken meanwhile.  Large,
// sampled and zero-size objects are nobody's and are all visited.
//
// Exactness.  An object of a covered allocator is free if its slab's
// list, its untouched tail, the caller's fast list or a batch the profiler
// holds back has it (mem/live_objects.h), after the covered allocators'
// messages are handled, so every free that has reached the owner is seen.
// A free that has not reached it, still batched in a running thread's
// remote cache, is not: that object is visited as live.  The caller's own
// batches for other allocators are posted first.

#include "../mem/live_objects.h"
#include "thread_alloc.h"

namespace snmalloc
{
  namespace detail
  {
    // f(sizeclass, list, head) for each list of free objects the calling
    // thread's allocator keeps off its slabs: its fast list (0) and the
    // batch the profiler holds back (1), per class.
    template<typename F>
    void for_each_detached_list(const Local& local, Alloc& core, F&& f)
    {
      for (sizeclass_t sc = 0; sc < NUM_SMALL_CLASSES; sc++)
      {
        f(sc, 0, local.fast[sc]);
        f(sc, 1, core.profile().held_objects(sc));
      }
    }

    inline void collect_detached(const Local& local, Alloc& core, DetachedFree& out)
    {
      for_each_detached_list(local, core, [&](sizeclass_t sc, size_t list, const FreeObject* head) {
        out.add(sc, list, head);
      });
    }

    // f(own), `own` the calling thread's allocator or nullptr, once every
    // message that reached the covered allocators is handled, under the
    // pool lock that keeps the idle ones idle.
    template<typename F>
    void with_covered_allocators(F&& f)
    {
      Alloc* own = local_cache.core;
      if (own != nullptr)
      {
        own->post_remote_frees();
        own->handle_messages();
      }
      alloc_pool.while_locked([&](Alloc* idle) {
        // Under the lock: a thread that exits now may leave messages that
        // arrived after its own last look.
        for (; idle != nullptr; idle = idle->next_in_pool)
          idle->handle_messages();
        f(own);
      });
    }

    // Is the slab span `c` of a covered allocator: `own`, or an idle one?
    // (A thread allocator's owner value is its address.)
    inline bool covered_slab(const ChunkSpan& c, const Alloc* own)
    {
      return (own != nullptr && c.tag == own->owner_value()) ||
        reinterpret_cast<const Alloc*>(c.tag)->in_pool;
    }

    // Small and large objects, in one pass over the pagemap, under the
    // pool lock.  `own` is the calling thread's allocator, if any.
    inline void visit_arena_objects(Alloc* own, const DetachedFree& own_detached, HeapVisitor visit)
    {
      const DetachedFree none{};
      walk_chunks([&](const ChunkSpan& c) {
        void* base = reinterpret_cast<void*>(c.base);
        if (c.kind == SpanKind::LargeRun)
        {
          visit(base, large_run::bytes_of_tag(c.tag));
          return;
        }
        if (c.kind != SpanKind::Slab || !covered_slab(c, own))
          return;
        bool is_own = own != nullptr && c.tag == own->owner_value();
        for_each_live_object(*c.slab, is_own ? own_detached : none, visit);
      });
    }

    // The census (see the top of this file), with a C visitor.
    inline void heap_walk_with(HeapVisitor visit) noexcept
    {
      with_covered_allocators([&](Alloc* own) {
        DetachedFree own_detached{};
        if (own != nullptr)
          collect_detached(local_cache, *own, own_detached);
        visit_arena_objects(own, own_detached, visit);
      });
      zero_size_slots.for_each_out([&](void* p) { visit(p, 0); });
      Profiler::visit_samples(visit);
    }
  } // namespace detail

  // The census: f(void* object, size_t usable_size) for each live object
  // (see the top of this file).  f must not allocate or free: the walk
  // holds the pool's and the sample lists' locks, and reads the calling
  // thread's free lists between calls.
  template<typename F>
  void heap_walk(F&& f) noexcept
  {
    using Fn = std::remove_reference_t<F>;
    detail::heap_walk_with(HeapVisitor{
      [](void* object, size_t usable_size, void* arg) { (*static_cast<Fn*>(arg))(object, usable_size); },
      const_cast<void*>(static_cast<const void*>(&f))});
  }
} // namespace snmalloc
