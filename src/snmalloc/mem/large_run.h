#pragma once
// Layer mem: large objects, runs of whole chunks.
//
// A large object occupies its size rounded up to a chunk (16 KiB), not to a
// power of two: the backend cuts runs of any length (backend/buddy.h).  The
// run's first pagemap entry carries a tag, its kind (a plain large object,
// or a sampled one of the profile pool) and its length in chunks; the other
// entries stay zero, so a pointer into them is not a valid free.  Both
// kinds are allocated, resized and freed here, and nowhere else.
//
// Growing a run tries the chunks after it first (free buddy blocks, or the
// backend's frontier).  Where they are taken, realloc moves the object to a
// new run placed with room after it to grow into (`outgrown`; other runs
// are packed among free chunks: backend/buddy.h), and from
// REMAP_THRESHOLD up it moves the pages themselves
// (mremap) instead of copying bytes.  Measured on this machine (4 KiB
// pages, a VM): moving 1 MiB took 12-24 us against 31 us for memcpy into
// resident memory and 680 us into fresh memory (page faults); 64 MiB took
// 40-56 us against 45 ms.  A moved run's pages keep their old mapping's
// offset, so the kernel keeps them as separate mappings (two more entries
// in /proc/self/maps per live moved run) until the run is freed, when its
// pages are replaced by a fresh mapping that merges back.  The threshold
// bounds that count by the live heap: at most one moved run per 4 MiB.
// A move costs page faults later, as its old run and, once freed, the
// moved run come back without pages: with a threshold of 1 MiB,
// perf-realloc-growth's buffers of up to 1 MiB took 70.0 k page faults
// against 6.3 k (0.23 s of its 1.1 s of CPU in the kernel, against 0.01),
// where a copy into resident memory would have cost 31 us a MiB.
//
// The checks build guards each run: [guard][object][guard], the object's
// usable size its size rounded up to pages, each guard GUARD_BYTES or more
// of inaccessible memory, so that an underflow or an overflow of up to that
// faults whatever lies beyond (an object of a size that is not a page
// multiple has up to a page of accessible slack).  The guard before is
// dropped when the object asks for more alignment than GUARD_BYTES.  A
// freed run is made inaccessible and quarantined before its chunks are
// reused (backend/quarantine.h); realloc never moves pages.  The guards
// cost no system call (the backend opens only the object), but pages that
// a reused run's guards cover stay resident while it lives.

#include "heap_counts.h"

namespace snmalloc
{
  // Anything at or above this fails with ENOMEM: it is beyond any arena and
  // keeps size arithmetic (rounding, headers) far from wrapping.
  constexpr size_t MAX_ALLOC_SIZE = size_t(1) << 46;

  constexpr size_t REMAP_THRESHOLD = size_t(4) << 20;

  // What a large object of `size` bytes occupies (in the checks build,
  // without its guards).
  constexpr size_t large_size(size_t size)
  {
    if constexpr (config::checks)
      return bits::align_up(size, Pal::PAGE_SIZE);
    return size <= config::CHUNK_SIZE ? config::CHUNK_SIZE
                                      : bits::align_up(size, config::CHUNK_SIZE);
  }

  namespace large_run
  {
    // The checks build's guards: 1 MiB, the farthest stray write that a
    // user would expect to be caught, as it is where large blocks are
    // separate mappings (glibc).
    constexpr size_t GUARD_BYTES = size_t(1) << 20;

    // Tag payload: the run's length in chunks from the object's first,
    // whether its pages were moved in (see the top of this file), and in
    // the checks build its guards: the pages after the object, and
    // whether a guard precedes it.
    constexpr uintptr_t MOVED = uintptr_t(1) << 40;
    constexpr size_t GUARD_PAGES_SHIFT = 41;
    constexpr uintptr_t GUARD_PAGES = uintptr_t(0x3ff) << GUARD_PAGES_SHIFT;
    constexpr uintptr_t GUARD_BEFORE = uintptr_t(1) << 51;

    inline size_t run_bytes_of_tag(uintptr_t tag)
    {
      return (tag_payload(tag) & (MOVED - 1)) << config::CHUNK_BITS;
    }

    // The object's usable bytes.
    inline size_t bytes_of_tag(uintptr_t tag)
    {
      if constexpr (config::checks)
        return run_bytes_of_tag(tag) -
          ((tag_payload(tag) & GUARD_PAGES) >> GUARD_PAGES_SHIFT) * Pal::PAGE_SIZE;
      return run_bytes_of_tag(tag);
    }

    // `flags`: MOVED and the guards.
    inline void set_tag(void* base, ChunkKind kind, size_t run_bytes, uintptr_t flags, uintptr_t meta)
    {
      pagemap.entry_of(base).set(make_tag(kind, (run_bytes >> config::CHUNK_BITS) | flags), meta);
    }

    // The checks build: the tag flags of the guard after an object of
    // `usable` bytes in a run of `run_bytes`.
    inline uintptr_t guard_after(size_t usable, size_t run_bytes)
    {
      return uintptr_t((run_bytes - usable) / Pal::PAGE_SIZE) << GUARD_PAGES_SHIFT;
    }

    // The checks build's run of an object of `usable` bytes, with its
    // guard after.
    constexpr size_t guarded_run_bytes(size_t usable)
    {
      return bits::align_up(usable + GUARD_BYTES, config::CHUNK_SIZE);
    }

    inline size_t guard_before_bytes(uintptr_t tag)
    {
      return (tag_payload(tag) & GUARD_BEFORE) != 0 ? GUARD_BYTES : 0;
    }

    // Set when a run could not grow in place, for the allocation that
    // realloc makes next to move it: that run is placed with room to grow
    // (Backend::alloc_large_chunks), others are packed.
    inline thread_local bool outgrown = false;

    // Is the run about to be allocated realloc's move of an outgrown one?
    inline bool take_outgrown()
    {
      bool growing = outgrown;
      outgrown = false;
      return growing;
    }

    // The checks build's alloc: a guarded run (see the top of this file).
    SNMALLOC_SLOW_PATH inline void*
    alloc_guarded(size_t usable, size_t align, bool zero, ChunkKind kind, uintptr_t meta)
    {
      size_t run = guarded_run_bytes(usable);
      size_t lead = align <= GUARD_BYTES ? GUARD_BYTES : 0;
      Backend::Chunks c =
        backend.alloc_large_chunks(lead + run, align, take_outgrown(), lead, run - usable);
      if (c.base == nullptr)
        return nullptr;
      void* base = static_cast<char*>(c.base) + lead;
      if (zero && !c.zeroed)
        std::memset(base, 0, usable);
      uintptr_t flags = guard_after(usable, run) | (lead != 0 ? GUARD_BEFORE : 0);
      set_tag(base, kind, run, flags, meta);
      heap_totals.add_large(1, int64_t(usable));
      return base;
    }

    // Give back [p, p + bytes), part of a run whose tag has `moved`.
    inline void give_back(void* p, size_t bytes, bool moved)
    {
      if (moved)
        Pal::replace_pages(p, bytes);
      backend.dealloc_chunks(p, bytes, moved);
    }

    // A run for `size` bytes aligned to `align`, tagged (kind, meta);
    // nullptr when memory is exhausted.
    SNMALLOC_FAST_PATH void* alloc(size_t size, size_t align, bool zero, ChunkKind kind, uintptr_t meta)
    {
      size_t bytes = large_size(size);
      if constexpr (config::checks)
        return alloc_guarded(bytes, align, zero, kind, meta);
      Backend::Chunks c = backend.alloc_large_chunks(bytes, align, take_outgrown());
      if (c.base == nullptr)
        return nullptr;
      if (zero && !c.zeroed)
        std::memset(c.base, 0, bytes);
      set_tag(c.base, kind, bytes, 0, meta);
      heap_totals.add_large(1, int64_t(bytes));
      return c.base;
    }

    // Is p the start of a run (a large object, sampled or not)?
    inline bool is_run(const void* p)
    {
      if (!pagemap.contains(p) || (pagemap.offset_of(p) & (config::CHUNK_SIZE - 1)) != 0)
        return false;
      uintptr_t tag = pagemap.entry_of(p).get_owner();
      return is_tag(tag) &&
        (tag_kind(tag) == ChunkKind::Large ||
         (tag_kind(tag) == ChunkKind::Sampled && tag_payload(tag) != 0));
    }

    // Bytes of the run starting at `base`.
    inline size_t bytes(const void* base)
    {
      return bytes_of_tag(pagemap.entry_of(base).get_owner());
    }

    inline void dealloc(void* base)
    {
      PagemapEntry& e = pagemap.entry_of(base);
      uintptr_t tag = e.get_owner();
      e.set(0, 0);
      size_t bytes = bytes_of_tag(tag);
      heap_totals.add_large(-1, -int64_t(bytes));
      if constexpr (config::checks)
      {
        size_t lead = guard_before_bytes(tag);
        backend.quarantine_chunks(static_cast<char*>(base) - lead, lead + run_bytes_of_tag(tag), bytes);
        return;
      }
      give_back(base, bytes, (tag_payload(tag) & MOVED) != 0);
    }

    // The checks build's resize_in_place: the guard pages move with the
    // object's end.
    SNMALLOC_SLOW_PATH inline bool resize_guarded(void* base, size_t size)
    {
      PagemapEntry& e = pagemap.entry_of(base);
      uintptr_t tag = e.get_owner();
      size_t old_usable = bytes_of_tag(tag);
      size_t old_run = run_bytes_of_tag(tag);
      size_t usable = large_size(size);
      size_t run = guarded_run_bytes(usable);
      if (run > old_run && !backend.extend_chunks(base, old_run, run))
      {
        outgrown = true;
        return false;
      }
      if (usable > old_usable &&
          !Pal::commit(static_cast<char*>(base) + old_usable, usable - old_usable))
      {
        if (run > old_run)
          backend.dealloc_chunks(static_cast<char*>(base) + old_run, run - old_run);
        return false;
      }
      (void)Pal::protect(static_cast<char*>(base) + usable, run - usable);
      uintptr_t flags = guard_after(usable, run) | (tag_payload(tag) & GUARD_BEFORE);
      set_tag(base, tag_kind(tag), run, flags, e.get_meta());
      heap_totals.add_large(0, int64_t(usable) - int64_t(old_usable));
      if (run < old_run)
        backend.dealloc_chunks(static_cast<char*>(base) + run, old_run - run);
      return true;
    }

    // Make the run at `base` hold `size` bytes without moving it: shrink it
    // (the tail goes back) or grow it into free chunks after it.
    inline bool resize_in_place(void* base, size_t size)
    {
      if constexpr (config::checks)
        return resize_guarded(base, size);
      PagemapEntry& e = pagemap.entry_of(base);
      uintptr_t tag = e.get_owner();
      uintptr_t moved = tag_payload(tag) & MOVED;
      size_t old_bytes = bytes_of_tag(tag);
      size_t new_bytes = large_size(size);
      if (new_bytes == old_bytes)
        return true;
      if (new_bytes > old_bytes && !backend.extend_chunks(base, old_bytes, new_bytes))
      {
        outgrown = true;
        return false;
      }
      set_tag(base, tag_kind(tag), new_bytes, moved, e.get_meta());
      heap_totals.add_large(0, int64_t(new_bytes) - int64_t(old_bytes));
      if (new_bytes < old_bytes)
        give_back(static_cast<char*>(base) + new_bytes, old_bytes - new_bytes, moved);
      return true;
    }

    // Make the run at `base` a run of `kind` named by `meta`, as it stands
    // (a large object that becomes a sampled one, or back).
    inline void retag(void* base, ChunkKind kind, uintptr_t meta)
    {
      PagemapEntry& e = pagemap.entry_of(base);
      e.set(make_tag(kind, tag_payload(e.get_owner())), meta);
    }

    // Move the first `bytes` of run `from` into run `to` by remapping its
    // pages; false (nothing moved) below the threshold or when the kernel
    // cannot.  `from` then reads as zero.
    inline bool move_pages(void* from, void* to, size_t bytes)
    {
      if (config::checks || bytes < REMAP_THRESHOLD)
        return false;
      bytes = bits::align_up(bytes, Pal::PAGE_SIZE);
      if (!Pal::move_pages(from, to, bytes))
        return false;
      const PagemapEntry& e = pagemap.entry_of(to);
      set_tag(to, tag_kind(e.get_owner()), run_bytes_of_tag(e.get_owner()), MOVED, e.get_meta());
      return true;
    }
  } // namespace large_run
} // namespace snmalloc
