#pragma once
// Layer mem: a walk over every chunk of the arena ever handed out, each
// span (a slab, a large run, a free buddy block, a metadata block, ...) once,
// read from the pagemap.  For reports that need the whole heap's layout
// (the footprint profile): nothing on an allocation or free path calls it.
//
// Consistency: none is promised.  The walk takes no lock, and other threads
// go on allocating and freeing, so a span may change kind under it and a
// slab's counts are the owner's, read as they are.  What it reads stays
// mapped (pagemap entries, descriptors, which are recycled, never unmapped)
// and it never reads a chunk's contents, so a race gives a stale figure,
// never a fault.

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
        s.bytes = size_t(1) << sizeclasses.slab_bits[slab->sizeclass];
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
              s.bytes = size_t(1) << sizeclasses.slab_bits[slab->sizeclass];
            }
            else
              s.kind = SpanKind::GuardedSlots;
            break;
          case ChunkKind::FreeBlock:
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
    size_t chunks = backend.carved_bytes() >> config::CHUNK_BITS;
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
