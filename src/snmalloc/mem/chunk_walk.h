#pragma once
// Layer mem: a walk over every chunk of the arena ever handed out, each
// span (a slab, a large run, a free buddy block, a metadata block, ...) once,
// read from the pagemap.  For reports that need the whole heap's layout
// (the footprint profile, the census): nothing on an allocation or free
// path calls it.
//
// A slab's chunks all hold its entry (owner, descriptor); every other kind
// tags its first chunk and leaves the rest 0.  So a slab's span is the run
// of chunks holding the same entry, found from the pagemap alone: the walk
// reads no descriptor, since one of another running thread's slabs may be
// released and its descriptor reused at any time.  Consistency: none is
// promised.  The walk takes no lock, and other threads go on allocating and
// freeing, so each span is shown as its entries were when read, or not at
// all.  Only the caller knows when reading a descriptor is safe (its own
// allocator's, an idle one's under the pool lock); what it reads stays
// mapped (descriptors are recycled, never unmapped), so a race there gives
// a stale figure, never a fault.

#include "large_run.h"

namespace snmalloc
{
  enum class SpanKind
  {
    Slab, // a thread's slab of small objects: `slab` set
    PoolSlab, // a slab of the profile pool (sampled small objects): `slab` set
    GuardedSlots, // the guarded sampling's slots (profile/guard)
    LargeRun, // a large object's run: `tag` is its pagemap tag
    SampledRun, // a large sampled object's run in the profile pool: `tag`
    FreeBlock, // a free buddy block: `tag`
    Meta, // allocator metadata: slab descriptors, allocators
    ZeroSize, // the zero-size allocations' slots
    Untagged, // no entry: the checks build's guard before a run, or a race
  };

  struct ChunkSpan
  {
    SpanKind kind;
    uintptr_t base;
    size_t bytes;
    uintptr_t tag = 0;
    const SlabMeta* slab = nullptr;
  };

  namespace chunk_walk_detail
  {
    // Bytes of the run of chunks from `index` (at most `left`) that hold
    // the same entry as it: a slab's span.
    inline size_t same_entry_bytes(size_t index, size_t left)
    {
      const PagemapEntry& first = pagemap.entries[index];
      uintptr_t owner = first.get_owner(), meta = first.get_meta();
      size_t n = 1;
      while (n < left && pagemap.entries[index + n].get_owner() == owner &&
             pagemap.entries[index + n].get_meta() == meta)
        n++;
      return n << config::CHUNK_BITS;
    }

    // The span starting at chunk `index` (at most `left` chunks long).
    inline ChunkSpan span_at(size_t index, size_t left)
    {
      const PagemapEntry& e = pagemap.entries[index];
      uintptr_t owner = e.get_owner(), meta = e.get_meta();
      ChunkSpan s{SpanKind::Untagged, reinterpret_cast<uintptr_t>(pagemap.chunk_address(index)), config::CHUNK_SIZE, owner};
      auto* slab = reinterpret_cast<const SlabMeta*>(meta);
      if (owner != 0 && !is_tag(owner))
      {
        if (slab == nullptr)
          return s;
        s.kind = SpanKind::Slab;
        s.slab = slab;
        s.bytes = same_entry_bytes(index, left);
      }
      else if (is_tag(owner))
      {
        switch (tag_kind(owner))
        {
          case ChunkKind::Large:
            s.kind = SpanKind::LargeRun;
            s.bytes = large_run::run_bytes_of_tag(owner);
            break;
          case ChunkKind::Sampled:
            if (tag_payload(owner) != 0)
            {
              s.kind = SpanKind::SampledRun;
              s.bytes = large_run::run_bytes_of_tag(owner);
            }
            else if (slab != nullptr)
            {
              s.kind = SpanKind::PoolSlab;
              s.slab = slab;
              s.bytes = same_entry_bytes(index, left);
            }
            else
              s.kind = SpanKind::GuardedSlots;
            break;
          case ChunkKind::FreeBlock:
          case ChunkKind::Decommitting:
            s.kind = SpanKind::FreeBlock;
            s.bytes = config::CHUNK_SIZE << (tag_payload(owner) & 63);
            break;
          case ChunkKind::Meta:
            s.kind = SpanKind::Meta;
            break;
          case ChunkKind::Zero:
            s.kind = SpanKind::ZeroSize;
            break;
        }
      }
      size_t chunks = s.bytes >> config::CHUNK_BITS;
      if (chunks == 0 || chunks > left)
        s.bytes = (chunks == 0 ? 1 : left) << config::CHUNK_BITS;
      return s;
    }
  } // namespace chunk_walk_detail

  // Call visit(const ChunkSpan&) for each span below the backend's frontier,
  // in address order.  A metadata block's chunks after its first carry no
  // entry: they are reported as part of it.
  template<typename Visit>
  void walk_chunks(Visit&& visit)
  {
    size_t chunks = backend.chunks_carved();
    bool after_meta = false;
    for (size_t i = 0; i < chunks;)
    {
      ChunkSpan s = chunk_walk_detail::span_at(i, chunks - i);
      if (s.kind == SpanKind::Untagged && after_meta)
        s.kind = SpanKind::Meta;
      after_meta = s.kind == SpanKind::Meta;
      visit(s);
      i += s.bytes >> config::CHUNK_BITS;
    }
  }
} // namespace snmalloc
