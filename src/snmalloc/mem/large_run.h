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
// new run, and from REMAP_THRESHOLD up it moves the pages themselves
// (mremap) instead of copying bytes.  Measured on this machine (4 KiB
// pages, a VM): moving 1 MiB took 12-24 us against 31 us for memcpy into
// resident memory and 680 us into fresh memory (page faults); 64 MiB took
// 40-56 us against 45 ms.  A moved run's pages keep their old mapping's
// offset, so the kernel keeps them as separate mappings (two more entries
// in /proc/self/maps per live moved run) until the run is freed, when its
// pages are replaced by a fresh mapping that merges back.  The threshold
// bounds that count by the live heap: at most one moved run per MiB.

#include "heap_counts.h"

namespace snmalloc
{
  // Anything at or above this fails with ENOMEM: it is beyond any arena and
  // keeps size arithmetic (rounding, headers) far from wrapping.
  constexpr size_t MAX_ALLOC_SIZE = size_t(1) << 46;

  constexpr size_t REMAP_THRESHOLD = size_t(1) << 20;

  // What a large object of `size` bytes occupies.
  constexpr size_t large_size(size_t size)
  {
    return size <= config::CHUNK_SIZE ? config::CHUNK_SIZE
                                      : bits::align_up(size, config::CHUNK_SIZE);
  }

  namespace large_run
  {
    // Tag payload: the run's length in chunks, and whether its pages were
    // moved in (see the top of this file).
    constexpr uintptr_t MOVED = uintptr_t(1) << 40;

    inline size_t bytes_of_tag(uintptr_t tag)
    {
      return (tag_payload(tag) & (MOVED - 1)) << config::CHUNK_BITS;
    }

    inline void set_tag(void* base, ChunkKind kind, size_t bytes, uintptr_t moved, uintptr_t meta)
    {
      pagemap.entry_of(base).set(make_tag(kind, (bytes >> config::CHUNK_BITS) | moved), meta);
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
    inline void* alloc(size_t size, size_t align, bool zero, ChunkKind kind, uintptr_t meta)
    {
      size_t bytes = large_size(size);
      Backend::Chunks c = backend.alloc_chunks(bytes, align);
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
      give_back(base, bytes, (tag_payload(tag) & MOVED) != 0);
    }

    // Make the run at `base` hold `size` bytes without moving it: shrink it
    // (the tail goes back) or grow it into free chunks after it.
    inline bool resize_in_place(void* base, size_t size)
    {
      PagemapEntry& e = pagemap.entry_of(base);
      uintptr_t tag = e.get_owner();
      uintptr_t moved = tag_payload(tag) & MOVED;
      size_t old_bytes = bytes_of_tag(tag);
      size_t new_bytes = large_size(size);
      if (new_bytes == old_bytes)
        return true;
      if (new_bytes > old_bytes && !backend.extend_chunks(base, old_bytes, new_bytes))
        return false;
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
      uintptr_t tag = pagemap.entry_of(base).get_owner();
      set_tag(base, kind, bytes_of_tag(tag), tag_payload(tag) & MOVED, meta);
    }

    // Move the first `bytes` of run `from` into run `to` by remapping its
    // pages; false (nothing moved) below the threshold or when the kernel
    // cannot.  `from` then reads as zero.
    inline bool move_pages(void* from, void* to, size_t bytes)
    {
      if (bytes < REMAP_THRESHOLD)
        return false;
      bytes = bits::align_up(bytes, Pal::PAGE_SIZE);
      if (!Pal::move_pages(from, to, bytes))
        return false;
      const PagemapEntry& e = pagemap.entry_of(to);
      set_tag(to, tag_kind(e.get_owner()), bytes_of_tag(e.get_owner()), MOVED, e.get_meta());
      return true;
    }
  } // namespace large_run
} // namespace snmalloc
