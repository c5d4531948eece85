#pragma once
// Layer global: the slow paths of the C++ front (api.h).  Each is where a
// fast path goes for one named reason (an empty fast list, a large or zero
// size, a free of another thread's object, a pointer not ours); the
// common ones are reached in tail calls so that the fast path saves no
// registers.

#include "thread_alloc.h"

#include <cerrno>

namespace snmalloc
{
  // A sampling hook returns `p` through this, so that its call is not a
  // tail call: the sample's walk starts at the hook's frame and reads the
  // rbp saved there, which a tail call's callee pushes its own registers
  // over (the walk then started from whatever they held).
  SNMALLOC_FAST_PATH void* keep_frame(void* p)
  {
    asm volatile("" : "+r"(p));
    return p;
  }

  // alloc_refill returned nullptr: with profiling, a sample point may be
  // due.  Out of line, from what alloc_slow keeps anyway (`local`'s core is
  // `core`; the class follows from the size), so that the common refill
  // keeps nothing live for this case.  Its frame address (which gives it a
  // frame pointer) is where a sample's stack walk starts.
  SNMALLOC_SLOW_PATH inline void* alloc_sample_due(Local& local, size_t size, size_t align, void* return_address)
  {
    Profiler::entered_sample_path(return_address, __builtin_frame_address(0));
    sizeclass_t sc = size_to_sizeclass(size);
    return keep_frame(local.core->alloc_sample_due(local.fast[sc], sc, size, align));
  }

  // A large allocation with profiling, which may be sampled: out of line
  // for the same reason, its frame where the sample's walk starts (which
  // then steps over none of the profiler's and allocator's frames: 250 of
  // the 470 instructions of a large sample's walk).
  SNMALLOC_SLOW_PATH inline void* alloc_large_sampling(
    Alloc& core, size_t size, size_t align, bool zero, void* return_address)
  {
    Profiler::entered_sample_path(return_address, __builtin_frame_address(0));
    return keep_frame(core.alloc_large(size, align, zero));
  }

  // The fast list of `sc`, the class of `size`, is empty: an object from a
  // refill, or from a sample point due in `sc`; nullptr when memory is
  // exhausted.  `return_address` is that of the slow path the fast path
  // left for, where a sample's stack is cut.
  SNMALLOC_FAST_PATH void* refill_small(
    Alloc& core, Local& local, sizeclass_t sc, size_t size, size_t align, void* return_address)
  {
    void* p = core.alloc_refill(local.fast[sc], sc);
    if (Profiler::enabled && SNMALLOC_UNLIKELY(p == nullptr))
      p = alloc_sample_due(local, size, align, return_address);
    return p;
  }

  // `return_address` is alloc_slow's, where a sample's stack is cut.
  SNMALLOC_FAST_PATH void* alloc_with(
    Alloc& core, Local& local, size_t size, size_t align, bool zero, void* return_address)
  {
    if (size == 0)
      size = 1;
    void* p;
    if (size <= config::MAX_SMALL_SIZE)
    {
      // Size 0 comes here with its class's fast list possibly non-empty.
      sizeclass_t sc = size_to_sizeclass(size);
      FreeObject*& fast = local.fast[sc];
      if (fast != nullptr)
      {
        p = fast;
        fast = fast->next_object();
      }
      else
        p = refill_small(core, local, sc, size, align, return_address);
      if (config::checks && p != nullptr)
        FreeObject::from(p)->clear_mark();
      if (zero && p != nullptr)
        Pal::fill(p, 0, size);
    }
    else if (Profiler::enabled)
      p = alloc_large_sampling(core, size, align, zero, return_address);
    else
      p = core.alloc_large(size, align, zero);
    if (p == nullptr)
      errno = ENOMEM;
    return p;
  }

  // alloc_slow's cases but a small malloc on an attached thread: sizes zero
  // and large, calloc, a thread with no allocator yet or any more.  Zero
  // bytes are a slot no byte of which can be accessed (mem/zero_size.h),
  // but in the checks build, whose copies check the bytes of a 16-byte
  // object.  `return_address` is alloc_slow's.
  SNMALLOC_SLOW_PATH inline void*
  alloc_unusual(size_t size, size_t align, bool zero, void* return_address) noexcept
  {
    if (!config::checks && size == 0)
    {
      if (void* p = zero_size_slots.alloc())
        return p;
    }
    Local& local = local_cache;
    if (SNMALLOC_UNLIKELY(local.core == nullptr))
    {
      void* p = nullptr;
      if (local.torn_down)
        p = with_borrowed_alloc([&](Alloc& core, Local& l) {
          return alloc_with(core, l, size, align, zero, return_address);
        });
      else if (attach_thread(local))
        return alloc_with(*local.core, local, size, align, zero, return_address);
      if (p == nullptr)
        errno = ENOMEM;
      return p;
    }
    return alloc_with(*local.core, local, size, align, zero, return_address);
  }

  // The size is zero or large, or a calloc's fast list was empty.
  SNMALLOC_FAST_PATH_EXIT inline void* alloc_slow(size_t size, size_t align, bool zero) noexcept
  {
    return alloc_unusual(size, align, zero, __builtin_return_address(0));
  }

  // A refill found no memory: out of line, so that the refill calls
  // nothing and needs no stack frame.
  SNMALLOC_SLOW_PATH inline void* refill_failed() noexcept
  {
    errno = ENOMEM;
    return nullptr;
  }

  // What alloc_refill_slow returns for the object p a refill gave.
  SNMALLOC_FAST_PATH void* refilled(void* p) noexcept
  {
    if (SNMALLOC_UNLIKELY(p == nullptr))
      return refill_failed();
    if constexpr (config::checks)
      FreeObject::from(p)->clear_mark();
    return p;
  }

  // alloc_refill_slow's refills but the usual one: a message waiting, no
  // awake slab, untouched objects or counts to update.
  SNMALLOC_SLOW_PATH inline void*
  alloc_refill_unusual(Alloc& core, Local& local, size_t size, size_t align, sizeclass_t sc, void* return_address) noexcept
  {
    void* p = core.alloc_refill_unusual(local.fast[sc], sc);
    if (Profiler::enabled && SNMALLOC_UNLIKELY(p == nullptr))
      p = alloc_sample_due(local, size, align, return_address);
    return refilled(p);
  }

  // A small malloc's fast list was empty: `sc` is the class of `size`,
  // which the fast path had found.  The usual case, a thread with an
  // allocator, is a refill and nothing else: through alloc_slow, which
  // found the class and read the empty list again, 28 instructions a
  // refill besides the refill itself on perf-random-replace.  The others
  // are tail calls, so that it sets up no stack frame.
  SNMALLOC_FAST_PATH_EXIT inline void* alloc_refill_slow(size_t size, size_t align, sizeclass_t sc) noexcept
  {
    Local& local = local_cache;
    Alloc* core = local.core;
    if (SNMALLOC_UNLIKELY(core == nullptr))
      return alloc_unusual(size, align, false, __builtin_return_address(0));
    if (SNMALLOC_UNLIKELY(!core->usual_refill_counted(sc)))
      return alloc_refill_unusual(*core, local, size, align, sc, __builtin_return_address(0));
    return refilled(core->alloc_refill_usual(local.fast[sc], sc));
  }

  // p, checked, of one of `core`'s slabs, yet not freed by the fast path
  // (a sized free that left it, a free before the thread was attached).
  // Out of line: its rejections' call needs a stack frame, which the
  // remote free would otherwise set up too.
  SNMALLOC_SLOW_PATH inline void dealloc_own(Alloc& core, void* p, SlabMeta* meta)
  {
    core.dealloc_local(p, meta);
  }

  // p, checked, of a slab of `owner`, freed on a thread whose allocator
  // is `core`.
  SNMALLOC_FAST_PATH void dealloc_attached(Alloc& core, void* p, Alloc* owner, SlabMeta* meta)
  {
    if (SNMALLOC_UNLIKELY(owner == &core))
      return dealloc_own(core, p, meta);
    core.dealloc_remote(owner, meta, p);
  }

  // The same on a thread with no allocator: attach one, or with none to
  // batch in (after teardown, or out of memory) post the one object
  // directly.
  SNMALLOC_SLOW_PATH inline void dealloc_unattached(void* p, Alloc* owner, SlabMeta* meta)
  {
    Local& local = local_cache;
    if (!local.torn_down && attach_thread(local))
      return dealloc_attached(*local.core, p, owner, meta);
    FreeObject* f = FreeObject::from(p);
    f->set_next(nullptr);
    owner->queue.post(f, f);
  }

  // p, checked, of a slab of `owner`: another allocator's, or this
  // thread's before it is attached.  The usual case, a thread's allocator
  // caching another's object, calls nothing but in tail calls, so that
  // the remote free saves no registers: 37 instructions a remote free on
  // perf-producer-freer, against 73 with the unusual cases inline (10 of
  // them saving and restoring registers) and the slot hashed and the
  // pagemap read again there.
  SNMALLOC_FAST_PATH void dealloc_elsewhere(void* p, Alloc* owner, SlabMeta* meta)
  {
    Alloc* core = local_cache.core;
    if (SNMALLOC_UNLIKELY(core == nullptr))
      return dealloc_unattached(p, owner, meta);
    dealloc_attached(*core, p, owner, meta);
  }

  // The checks of a free off the fast path, of p in a slab `meta`
  // describes (the checks build also poisons p).
  SNMALLOC_FAST_PATH void check_free_elsewhere(void* p, const SlabMeta* meta)
  {
    if constexpr (config::checks)
    {
      SlabMeta::check_free(p, meta->base, meta->sizeclass, link_mask(p));
      SlabMeta::poison(p, sizeclass_to_size(meta->sizeclass));
    }
    else if (!meta->is_object_start(p))
      report_bad_free(BadFree::Interior, p);
  }

  // An object of another allocator's slab (or of this thread's, before it
  // is attached), whose pagemap entry names `owner` and `meta`.  Off the
  // fast path, so the pointer is checked here.
  SNMALLOC_FAST_PATH void dealloc_remote(void* p, Alloc* owner, SlabMeta* meta)
  {
    check_free_elsewhere(p, meta);
    dealloc_elsewhere(p, owner, meta);
  }

  // A free of a p outside the arena: nullptr, or not ours.
  SNMALLOC_SLOW_PATH inline void dealloc_outside_arena(void* p) noexcept
  {
    if (p != nullptr)
      report_bad_free(BadFree::Invalid, p);
  }

  // A free of a p in a chunk no slab holds: `owner` is its pagemap
  // entry's, a tag or 0.
  SNMALLOC_SLOW_PATH inline void dealloc_not_in_slab(void* p, uintptr_t owner) noexcept
  {
    if (owner == 0)
      report_bad_free(BadFree::Invalid, p);
    switch (tag_kind(owner))
    {
      case ChunkKind::Large:
        if ((pagemap.offset_of(p) & (config::CHUNK_SIZE - 1)) != 0)
          report_bad_free(BadFree::Interior, p);
        large_run::dealloc(p);
        return;
      case ChunkKind::Sampled:
        Profiler::dealloc_sampled(p);
        return;
      case ChunkKind::Zero:
        zero_size_slots.dealloc(p);
        return;
      default:
        report_bad_free(BadFree::Invalid, p);
    }
  }

  // p's pagemap entry, or nullptr outside the arena.
  inline const PagemapEntry* entry_in_arena(const void* p)
  {
    return pagemap.contains(p) ? &pagemap.entry_of(p) : nullptr;
  }

  // A sized free's or realloc's pointer that its fast path did not free
  // (a sized free of another thread's object whose size fits its slab
  // takes dealloc_not_mine, as the unsized free does); `entry` is its
  // pagemap entry (entry_in_arena).  The cases but a remote free are out
  // of line, for the reason dealloc_elsewhere gives.
  SNMALLOC_SLOW_PATH inline void dealloc_slow(void* p, const PagemapEntry* entry) noexcept
  {
    if (SNMALLOC_UNLIKELY(entry == nullptr))
      return dealloc_outside_arena(p);
    uintptr_t owner = entry->get_owner();
    if (SNMALLOC_UNLIKELY(is_tag(owner) || owner == 0))
      return dealloc_not_in_slab(p, owner);
    dealloc_remote(p, reinterpret_cast<Alloc*>(owner), reinterpret_cast<SlabMeta*>(entry->get_meta()));
  }

  // The free fast path found p in the arena, in a chunk whose pagemap
  // entry names `owner`, not this thread's allocator, and `meta_value`.
  // With an allocator attached, `owner` is then another's (a thread's
  // allocator is its own owner value), so dealloc_attached's test for this
  // thread's own is left out, as are dealloc_slow's test for a p outside
  // the arena and its reads of the entry: 29 instructions a remote free
  // here and 2 on the fast path's branch to it, against 37 in dealloc_slow
  // (perf-larson 1344.9 -> 1341.7 M, with RemoteCache's count in place).
  SNMALLOC_SLOW_PATH inline void
  dealloc_not_mine(void* p, uintptr_t owner, uintptr_t meta_value) noexcept
  {
    if (SNMALLOC_UNLIKELY(is_tag(owner) || owner == 0))
      return dealloc_not_in_slab(p, owner);
    auto* meta = reinterpret_cast<SlabMeta*>(meta_value);
    check_free_elsewhere(p, meta);
    Alloc* core = local_cache.core;
    if (SNMALLOC_UNLIKELY(core == nullptr))
      return dealloc_unattached(p, reinterpret_cast<Alloc*>(owner), meta);
    core->dealloc_remote(reinterpret_cast<Alloc*>(owner), meta, p);
  }
} // namespace snmalloc
