#pragma once
// Layer global: the checks build's last look at freed small objects.
//
// A write after free shows where it overwrote a freed object's link
// (ds/freelist.h), when the allocator reads it again: the object handed
// out, or its slab released; or its free mark, when the object is freed
// again.  An object that is never handed out again is never read, so a
// short program (a test) could write into one and end unseen.  The checks
// shims sweep at exit (override/exit_sweep.h): every free object of the
// allocators the census covers (global/heap_walk.h: the calling thread's
// and the idle ones of threads that exited), after their messages, has its
// link and mark read.  Not the zeroed bytes past them (SlabMeta::POISON):
// an object linked from a slab's untouched tail may hold what a released
// slab left there.

#include "heap_walk.h"

namespace snmalloc::detail
{
  // The objects of a list of one slab's free objects, at most `limit` of
  // them (a slab's capacity: the checks build stops double frees at the
  // free, so no list has a cycle, but a bound costs nothing).
  inline void sweep_free_list(const FreeObject* head, size_t limit)
  {
    for (const FreeObject* f = head; f != nullptr && limit-- != 0; f = f->next_object())
    {
      if (SNMALLOC_UNLIKELY(!const_cast<FreeObject*>(f)->marked_free()))
        report_fatal_at("write after free (found at exit) into the freed object at", f);
    }
  }

  // Read the link and mark of every free object of the covered allocators'
  // slabs, their lists and the calling thread's fast lists; a fatal error
  // at the first that a write after free changed.  Skipped when the pool's
  // or the backend's lock stays held for some milliseconds: an exit from a
  // signal handler that interrupted an allocation, or from a census's
  // visitor, would wait for them for ever (the lists may be half written
  // then, too).
  inline void sweep_freed_objects() noexcept
  {
    if constexpr (config::checks)
    {
      constexpr unsigned TRIES = 1000;
      if (!alloc_pool.lock_free_within(TRIES) || !backend.lock_free_within(TRIES))
        return;
      with_covered_allocators([](Alloc* own) {
        if (own != nullptr)
          for_each_detached_list(local_cache, *own, [](sizeclass_t sc, size_t, const FreeObject* head) {
            sweep_free_list(head, sizeclasses.capacity[sc]);
          });
        walk_chunks([&](const ChunkSpan& c) {
          if (c.kind == SpanKind::Slab && covered_slab(c, own))
            sweep_free_list(c.slab->free, sizeclasses.capacity[c.slab->sizeclass]);
        });
      });
    }
  }
} // namespace snmalloc::detail
