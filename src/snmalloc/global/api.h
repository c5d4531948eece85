#pragma once
// Layer global: the C++ front of the allocator.  alloc and dealloc are the
// fast paths; everything they cannot finish goes to a named slow path.

#include "slow_paths.h"

#include <cerrno>

namespace snmalloc
{
  constexpr size_t MIN_ALIGN = config::MIN_ALLOC_SIZE;

  // calloc's clearing of p, just popped, in the checks build: an object of
  // a slab cut from zeroed memory is zero past its link and mark
  // (SlabMeta::POISON) and its mark is cleared, so only the link is left;
  // other slabs' objects may hold what their memory held before.  (Clearing
  // those slabs when they were cut instead cost producer-consumer 16% more
  // instructions, 147 MB of clearing for 2 million objects, callgrind.)
  SNMALLOC_FAST_PATH void clear_checked(FreeObject* p, size_t size)
  {
    if (SNMALLOC_LIKELY(reinterpret_cast<const SlabMeta*>(pagemap.entry_of(p).get_meta())->zeroed))
      p->next.store(0, std::memory_order_relaxed);
    else
      Pal::fill(static_cast<void*>(p), 0, size);
  }

  template<bool zero = false>
  SNMALLOC_FAST_PATH void* alloc_impl(size_t size, size_t align)
  {
    Local& local = local_cache;
    if (SNMALLOC_LIKELY(size - 1 < config::MAX_SMALL_SIZE))
    {
      sizeclass_t sc = size_to_sizeclass(size);
      FreeObject* p = local.fast[sc];
      if (SNMALLOC_LIKELY(p != nullptr))
      {
        FreeObject* next = p->next_object();
        local.fast[sc] = next;
        if constexpr (config::checks)
          p->clear_mark();
        // A slab's list links objects freed in any order, long ago: start
        // loading the class's next one now, so the next malloc does not
        // wait for it.
        __builtin_prefetch(next, 1);
        if constexpr (zero && config::checks)
          clear_checked(p, size);
        else if constexpr (zero)
          Pal::fill(static_cast<void*>(p), 0, size);
        return p;
      }
      if constexpr (!zero)
        return alloc_refill_slow(size, align, sc);
    }
    return alloc_slow(size, align, zero);
  }

  SNMALLOC_FAST_PATH void* alloc(size_t size)
  {
    return alloc_impl<false>(size, MIN_ALIGN);
  }

  SNMALLOC_FAST_PATH void* alloc_zeroed(size_t size)
  {
    return alloc_impl<true>(size, MIN_ALIGN);
  }

  // `align` must be a power of two; nullptr (errno ENOMEM) when it cannot be
  // served.  Natural alignment of sizeclasses serves small aligned requests.
  SNMALLOC_FAST_PATH void* alloc_aligned(size_t align, size_t size)
  {
    if (align <= MIN_ALIGN)
      return alloc(size);
    if (size == 0)
      size = 1;
    size_t rounded = aligned_size(align, size);
    if (SNMALLOC_UNLIKELY(rounded < size))
    {
      errno = ENOMEM;
      return nullptr;
    }
    Profiler::AskedFor asked(rounded, size);
    return alloc_impl<false>(rounded, align);
  }

  // A free fast path's caller that leaves every other owner's p to its
  // slow path.
  struct NotFreed
  {
    SNMALLOC_FAST_PATH bool operator()(uintptr_t, uintptr_t) const
    {
      return false;
    }
  };

  // Any slab will do: a free that knows nothing of the object's size.
  struct AnyClass
  {
    SNMALLOC_FAST_PATH bool operator()(const SlabMeta*) const
    {
      return true;
    }
  };

  // The free fast path: true when p was this thread's and is freed.  Not
  // for a p outside the arena, which dealloc_slow reports.  An unaligned p
  // fails the object-start check of the free (SlabMeta::owner_object_start,
  // check_free), or of dealloc_slow.  A sized free passes `in_class`, and an
  // object of another class leaves for the slow path, which tells a wrong
  // size from an odd right one.  The owner a thread's allocator writes in
  // the pagemap is its address: having compared equal, it is the allocator,
  // with no load of local.core.  `other(meta, owner)` is called when p is
  // in the arena but another owner's, with its pagemap entry's meta and
  // owner, and says whether it freed p.
  template<typename InClass = AnyClass, typename Other = NotFreed>
  SNMALLOC_FAST_PATH bool dealloc_fast(void* p, InClass in_class = {}, Other other = {})
  {
    uintptr_t offset = pagemap.offset_of(p);
    if (SNMALLOC_LIKELY(offset < pagemap.size))
    {
      PagemapEntry& entry = pagemap.entry_at(offset);
      uintptr_t owner = entry.get_owner();
      if (SNMALLOC_LIKELY(owner == local_cache.owner))
      {
        auto* meta = reinterpret_cast<SlabMeta*>(entry.get_meta());
        if (!in_class(meta))
          return false;
        if constexpr (config::checks)
          reinterpret_cast<Alloc*>(owner)->dealloc_local_checked(p, meta);
        else
          reinterpret_cast<Alloc*>(owner)->dealloc_local(p, meta);
        return true;
      }
      return other(entry.get_meta(), owner);
    }
    return false;
  }

  // The free leaves its fast path for one of two slow paths: p outside the
  // arena (nullptr among them), or in a chunk not this thread's, with the
  // owner the fast path read and the meta of the pagemap entry it found.
  SNMALLOC_FAST_PATH void dealloc(void* p)
  {
    auto not_mine = [p](uintptr_t meta, uintptr_t owner) {
      dealloc_not_mine(p, owner, meta);
      return true;
    };
    if (!dealloc_fast(p, AnyClass{}, not_mine))
      dealloc_outside_arena(p);
  }

  // Bytes usable at p (0 for nullptr and pointers not from this allocator).
  inline size_t alloc_size(const void* p)
  {
    if (!pagemap.contains(p))
      return 0;
    const PagemapEntry& entry = pagemap.entry_of(p);
    uintptr_t owner = entry.get_owner();
    if (!is_tag(owner))
    {
      if (owner == 0)
        return 0;
      return sizeclass_to_size(
        reinterpret_cast<const SlabMeta*>(entry.get_meta())->sizeclass);
    }
    switch (tag_kind(owner))
    {
      case ChunkKind::Large:
        return large_run::bytes_of_tag(owner);
      case ChunkKind::Sampled:
        return Profiler::sampled_object(p).size;
      default:
        return 0;
    }
  }

  // What realloc did with large objects: bytes it copied out of them, and
  // what it spared (bytes of pages it moved by remapping, runs it resized in
  // place).  Small objects are not counted: a copy of one is at most 64 KiB
  // and a shared counter would cost more than it tells.
  struct ReallocStats
  {
    std::atomic<size_t> bytes_copied{0};
    std::atomic<size_t> bytes_remapped{0};
    std::atomic<size_t> resized_in_place{0};
  };

  inline ReallocStats realloc_stats;

  namespace detail
  {
    inline void count(std::atomic<size_t>& counter, size_t n)
    {
      counter.fetch_add(n, std::memory_order_relaxed);
    }

    // A large object resized in place where its run allows.  Growth is
    // allocation, which the profiler counts (CoreState::grew_in_place); out
    // of line, so the stack it may capture is cut here.  A sampled object
    // shrinks by moving: its weight stands for the larger size it was
    // sampled at.
    SNMALLOC_SLOW_PATH inline bool resize_large_in_place(void* p, size_t usable, size_t size)
    {
      Profiler::entered_slow_path(__builtin_return_address(0));
      size_t bytes = large_size(size);
      if (bytes == usable)
        return true;
      bool sampled = tag_kind(pagemap.entry_of(p).get_owner()) == ChunkKind::Sampled;
      if (bytes < usable)
        return !sampled && large_run::resize_in_place(p, size);
      if (!large_run::resize_in_place(p, size))
        return false;
      if (Alloc* core = local_cache.core)
        core->profile().grew_in_place(p, size, bytes - usable, bytes, sampled);
      return true;
    }

    // Can `p`, of usable size `usable`, hold `size` bytes without moving?
    // Small objects, sampled ones too, stay while they keep at least half
    // their block, as tcmalloc's and mimalloc's do: a shrink into a smaller
    // class copied the object for at most half a block of memory (memmove
    // was 38% of a realloc-heavy cross-thread benchmark, xthread-mix).
    // Resizing in place is not an allocation, so the profile records none
    // (moving sampled ones every time, as the design first said, copied
    // buffers over and over once sampled).
    inline bool resize_in_place(void* p, size_t usable, size_t size)
    {
      if (usable <= config::MAX_SMALL_SIZE)
        return size <= usable &&
          (size >= usable / 2 || sizeclass_to_size(size_to_sizeclass(size)) == usable);
      return size > config::MAX_SMALL_SIZE && resize_large_in_place(p, usable, size);
    }

    // The checks build: a small object realloc resizes must be one handed
    // out and not freed since (realloc frees it when it moves).
    SNMALLOC_SLOW_PATH inline void check_live(void* p)
    {
      const PagemapEntry& entry = pagemap.entry_of(p);
      if (is_tag(entry.get_owner()))
        return; // sampled: the profiler checks its own
      const auto* meta = reinterpret_cast<const SlabMeta*>(entry.get_meta());
      if (!meta->is_object_start(p))
        report_bad_free(BadFree::Interior, p);
      if (FreeObject::from(p)->marked_free())
        report_bad_free(BadFree::DoubleFree, p);
    }

    // Move realloc's `bytes` out of the large object p into q: by remapping
    // pages where q is a large run too, else by copying.
    inline void move_contents(void* q, void* p, size_t bytes)
    {
      if (large_run::is_run(q) && large_run::move_pages(p, q, bytes))
      {
        count(realloc_stats.bytes_remapped, bytes);
        return;
      }
      Pal::copy(q, p, bytes);
      count(realloc_stats.bytes_copied, bytes);
    }
  } // namespace detail

  // Bytes an allocation of `size` bytes (no alignment asked) is given.
  inline size_t usable_size_for(size_t size)
  {
    if (size == 0)
      size = 1;
    return size <= config::MAX_SMALL_SIZE ? sizeclass_to_size(size_to_sizeclass(size))
                                          : large_size(size);
  }

  // Does p, in an object alloc_size knows, point at its start?  (A sampled
  // object's start is checked by its record, at the free.)
  inline bool starts_object(const void* p)
  {
    const PagemapEntry& entry = pagemap.entry_of(p);
    uintptr_t owner = entry.get_owner();
    if (!is_tag(owner))
      return reinterpret_cast<const SlabMeta*>(entry.get_meta())->is_object_start(p);
    if (tag_kind(owner) == ChunkKind::Sampled)
      return Profiler::starts_sample(p);
    return tag_kind(owner) != ChunkKind::Large ||
      (pagemap.offset_of(p) & (config::CHUNK_SIZE - 1)) == 0;
  }

  // A sized free that missed the fast path: the object must be at least
  // `size` bytes.  (A smaller size proves nothing: an aligned allocation
  // is larger than the size its caller frees it with.)  `exact`, if
  // given, says whether the size is the one our operator new was asked
  // for, with no alignment (operator delete(p, size)), so the object is of
  // that size's class; asked only when it is not.  A wrong size at an
  // interior pointer (`delete` of a `new[]` array) is reported as the
  // interior pointer.
  SNMALLOC_SLOW_PATH inline void
  dealloc_sized_slow(void* p, size_t size, bool (*exact)() noexcept = nullptr) noexcept
  {
    // A sampled object's size is in the record its start finds: any other
    // pointer into it is left to dealloc_slow to name.
    uintptr_t owner = pagemap.contains(p) ? pagemap.entry_of(p).get_owner() : 0;
    bool sampled = is_tag_of(owner, ChunkKind::Sampled);
    size_t usable = sampled && !starts_object(p) ? 0 : alloc_size(p);
    if (
      usable != 0 &&
      (size > usable || (exact != nullptr && usable_size_for(size) != usable && exact())))
      report_bad_free(starts_object(p) ? BadFree::SizeMismatch : BadFree::Interior, p);
    dealloc_slow(p, entry_in_arena(p));
  }

  // A sized free of an object in another allocator's slab whose size
  // `fits` it, by the slab fields other threads read (on the line the
  // remote free reads anyway): freed as free frees it.  Anything else is
  // left to dealloc_sized_slow, which checks and names it.  Through the
  // slow path's lookups, a remote delete(p, size) cost 63 instructions
  // more than a remote free, now 10 (perf-producer-consumer-delete).
  template<typename Fits>
  SNMALLOC_FAST_PATH bool dealloc_remote_if(void* p, uintptr_t owner, uintptr_t meta, Fits fits)
  {
    if (is_tag(owner) || owner == 0 || !fits(reinterpret_cast<const SlabMeta*>(meta)))
      return false;
    dealloc_not_mine(p, owner, meta);
    return true;
  }

  // Sized free (free_sized, the aligned deletes): the object must be at
  // least `size` bytes, checked off the fast path (on every path in the
  // checks build); this thread's objects' fast path ignores the size.
  SNMALLOC_FAST_PATH void dealloc(void* p, size_t size)
  {
    auto fits = [size](const SlabMeta* meta) { return size <= meta->object_size; };
    auto remote = [p, fits](uintptr_t meta, uintptr_t owner) {
      return dealloc_remote_if(p, owner, meta, fits);
    };
    if (config::checks || !dealloc_fast(p, AnyClass{}, remote))
      dealloc_sized_slow(p, size);
  }

  // operator delete(p, size): `size` is what operator new was asked for,
  // with no alignment, so the object is of that size's class if that new
  // was ours (`new_is_ours`): checked on the fast path too, in one compare
  // against the slab's range of sizes (a few instructions on this path
  // only).  A size of 0 (new of 0 bytes is given size 1's class) is left
  // to the slow path.
  SNMALLOC_FAST_PATH void dealloc_as_allocated(void* p, size_t size, bool (*new_is_ours)() noexcept)
  {
    auto of_size = [size](const SlabMeta* meta) { return meta->holds_size(size); };
    auto remote = [p, of_size](uintptr_t meta, uintptr_t owner) {
      return dealloc_remote_if(p, owner, meta, of_size);
    };
    if (config::checks || !dealloc_fast(p, of_size, remote))
      dealloc_sized_slow(p, size, new_is_ours);
  }

  // realloc of p, at which no live object is: the free's own checks say
  // what p is (a freed sampled object is a double free), and stop.
  [[noreturn]] SNMALLOC_SLOW_PATH inline void report_no_object(void* p) noexcept
  {
    dealloc_slow(p, entry_in_arena(p));
    report_bad_free(BadFree::Invalid, p);
  }

  // realloc semantics: p == nullptr allocates; size == 0 frees and returns
  // nullptr (as glibc does); failure leaves p untouched.
  inline void* reallocate(void* p, size_t size)
  {
    if (p == nullptr)
      return alloc(size);
    if (size == 0)
    {
      dealloc(p);
      return nullptr;
    }
    size_t usable = alloc_size(p);
    if (usable == 0 && !zero_size_slots.holds(p))
      report_no_object(p);
    bool large = usable > config::MAX_SMALL_SIZE;
    if (large && !large_run::is_run(p))
      report_bad_free(BadFree::Interior, p);
    if constexpr (config::checks)
    {
      if (!large)
        detail::check_live(p);
    }
    if (size < MAX_ALLOC_SIZE && detail::resize_in_place(p, usable, size))
    {
      if (large)
        detail::count(realloc_stats.resized_in_place, 1);
      return p;
    }
    void* q = alloc(size);
    if (q == nullptr)
      return nullptr;
    size_t bytes = usable < size ? usable : size;
    if (!large)
      Pal::copy(q, p, bytes);
    else
      detail::move_contents(q, p, bytes);
    dealloc(p);
    return q;
  }
} // namespace snmalloc
