#pragma once
// Layer ds: the pagemap, one entry per 16 KiB chunk of the allocator's arena.
//
// Layout.  The arena is one reservation made at start-up (see
// backend/arena.h) and the pagemap is a flat array covering exactly it,
// committed lazily by the kernel as entries are first written.  A flat map of
// the whole 47-bit address space would need a 128 GiB reservation, which
// valgrind refuses (it accepts 32 GiB, not 64 GiB), so programs using such an
// allocator cannot be measured with callgrind.  Covering only the arena costs
// the fast path nothing: free() has to test that a pointer is in the arena
// anyway (this one unsigned compare is also the nullptr test), and the offset
// it computes for that test is the pagemap index.
//
// An entry is two words.  `owner` is either the frontend allocator that owns
// the chunk's slab (a pointer, so even) or an odd tag saying what else the
// chunk is; `meta` is the slab's metadata, or data belonging to the tag.

#include "../ds_core/ds_core.h"

#include <atomic>

namespace snmalloc
{
  enum class ChunkKind : uintptr_t
  {
    Large = 1, // first chunk of a large object; payload: run (mem/large_run.h)
    // Sampled objects of the profile pool: payload 0 for a pool slab (meta:
    // the slab), else the first chunk of a large sampled run (payload as
    // Large; meta: its sample record).
    Sampled = 2,
    FreeBlock = 3, // first chunk of a free buddy block; payload: order, dirty
    Meta = 4, // allocator metadata
    Zero = 5, // zero-size allocations' slots, inaccessible (mem/zero_size.h)
    // First chunk of a free buddy block off the free lists while its pages
    // are returned, outside the backend's lock; payload: order.  meta: the
    // block before it on its list and the next such block, as a free
    // block's links (backend/buddy.h, take_decaying).
    Decommitting = 6,
  };

  constexpr uintptr_t make_tag(ChunkKind kind, uintptr_t payload)
  {
    return (payload << 8) | (uintptr_t(kind) << 1) | 1;
  }

  constexpr bool is_tag(uintptr_t owner)
  {
    return (owner & 1) != 0;
  }

  constexpr ChunkKind tag_kind(uintptr_t owner)
  {
    return ChunkKind((owner >> 1) & 0x7f);
  }

  // A tag of `kind`, whatever its payload: one compare of the low byte.
  constexpr bool is_tag_of(uintptr_t owner, ChunkKind kind)
  {
    return (owner & 0xff) == make_tag(kind, 0);
  }

  constexpr uintptr_t tag_payload(uintptr_t owner)
  {
    return owner >> 8;
  }

  struct PagemapEntry
  {
    // Written by the chunk's owner before any pointer into the chunk is
    // published, read by any thread that frees such a pointer: the publication
    // orders them, so relaxed accesses suffice.
    std::atomic<uintptr_t> owner{0};
    std::atomic<uintptr_t> meta{0};

    uintptr_t get_owner() const
    {
      return owner.load(std::memory_order_relaxed);
    }

    uintptr_t get_meta() const
    {
      return meta.load(std::memory_order_relaxed);
    }

    void set(uintptr_t o, uintptr_t m)
    {
      owner.store(o, std::memory_order_relaxed);
      meta.store(m, std::memory_order_relaxed);
    }
  };

  struct Pagemap
  {
    // Zero until the arena exists, so every pointer is "outside" before then.
    uintptr_t base = 0;
    size_t size = 0;
    PagemapEntry* entries = nullptr;

    // The offset of p in the arena; >= size when p is outside it.
    SNMALLOC_FAST_PATH uintptr_t offset_of(const void* p) const
    {
      return reinterpret_cast<uintptr_t>(p) - base;
    }

    SNMALLOC_FAST_PATH PagemapEntry& entry_at(uintptr_t offset) const
    {
      return entries[offset >> config::CHUNK_BITS];
    }

    SNMALLOC_FAST_PATH PagemapEntry& entry_of(const void* p) const
    {
      return entry_at(offset_of(p));
    }

    bool contains(const void* p) const
    {
      return offset_of(p) < size;
    }

    size_t chunk_index(const void* p) const
    {
      return offset_of(p) >> config::CHUNK_BITS;
    }

    void* chunk_address(size_t index) const
    {
      return reinterpret_cast<void*>(base + (index << config::CHUNK_BITS));
    }
  };

  inline Pagemap pagemap;
} // namespace snmalloc
