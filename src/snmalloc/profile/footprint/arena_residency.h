#pragma once
// Layer profile/footprint: where the arena's resident pages are, by what
// holds them, from one walk over every chunk (mem/chunk_walk.h) and one
// mincore over the arena's carved part.
//
// A slab's resident bytes are split in two: its objects out (to the
// program, or waiting in a thread's fast list), taken as resident, and the
// rest, free slots and the slack after the last object, which the objects
// out pin (fragmentation, per sizeclass).  A slab with no object out,
// kept for reuse, is an empty slab.  Large runs are live objects; the
// profile pool's slabs and runs hold the sampled objects and their
// records.  The figures are a racy snapshot (chunk_walk.h).

#include "../../mem/mem.h"
#include "resident_pages.h"

#include <array>

namespace snmalloc::profile
{
  struct ArenaResidency
  {
    // The arena's carved part, page by page, for the sampled objects.
    ResidentPages pages;
    uintptr_t base = 0;
    size_t carved_bytes = 0;

    // Objects out of slabs and unsampled large runs, bytes resident.
    size_t live_bytes = 0;
    // Per sizeclass: free slots and slack of slabs with objects out, and
    // slabs with none out, kept for reuse.
    std::array<size_t, NUM_SMALL_CLASSES> free_slot_bytes{};
    std::array<size_t, NUM_SMALL_CLASSES> empty_slab_bytes{};
    size_t free_block_bytes = 0; // freed chunks (empty slabs, large runs)
    size_t meta_bytes = 0;
    size_t pool_slab_bytes = 0; // profile pool: sampled small objects, records
    size_t sampled_run_bytes = 0; // profile pool: sampled large objects
    size_t guarded_slot_bytes = 0;
    size_t zero_size_bytes = 0;
    size_t untagged_bytes = 0;
    size_t resident_total = 0;

    void add_slab(const ChunkSpan& s, size_t resident)
    {
      sizeclass_t sc = s.slab->sizeclass_seen();
      if (sc >= NUM_SMALL_CLASSES)
        return;
      size_t out = size_t(s.slab->objects_out_seen()) * sizeclass_to_size(sc);
      size_t live = out < resident ? out : resident;
      live_bytes += live;
      if (out == 0)
        empty_slab_bytes[sc] += resident;
      else
        free_slot_bytes[sc] += resident - live;
    }

    void add(const ChunkSpan& s)
    {
      size_t resident = pages.bytes_in(s.base, s.base + s.bytes);
      resident_total += resident;
      switch (s.kind)
      {
        case SpanKind::Slab:
          add_slab(s, resident);
          break;
        case SpanKind::LargeRun:
          live_bytes += resident;
          break;
        case SpanKind::PoolSlab:
          pool_slab_bytes += resident;
          break;
        case SpanKind::SampledRun:
          sampled_run_bytes += resident;
          break;
        case SpanKind::GuardedSlots:
          guarded_slot_bytes += resident;
          break;
        case SpanKind::FreeBlock:
          free_block_bytes += resident;
          break;
        case SpanKind::Meta:
          meta_bytes += resident;
          break;
        case SpanKind::ZeroSize:
          zero_size_bytes += resident;
          break;
        case SpanKind::Untagged:
          untagged_bytes += resident;
          break;
      }
    }
  };

  // Walk the arena now.
  inline ArenaResidency read_arena_residency()
  {
    ArenaResidency a;
    a.base = pagemap.base;
    a.carved_bytes = backend.chunks_carved() << config::CHUNK_BITS;
    a.pages = ResidentPages(a.base, a.carved_bytes);
    walk_chunks([&a](const ChunkSpan& s) { a.add(s); });
    return a;
  }
} // namespace snmalloc::profile
