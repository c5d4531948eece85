#pragma once
// Layer mem: a walk over the pagemap from the arena's base to the buddy
// allocator's frontier, showing each chunk where something starts: a slab
// (of a thread's allocator or of the profile pool), a large or sampled
// run, a free block, metadata, the zero-size slots.  Every view of the
// whole heap goes through it and decides what to read of what it is shown.
//
// A slab's chunks all hold its entry (owner, descriptor); every other kind
// tags its first chunk and leaves the rest 0.  So a slab starts where the
// entry differs from the previous chunk's, and anything else where its tag
// is.  Other threads create and release slabs and runs meanwhile: each
// entry is read once, so each thing is shown as it was at that read, or
// not at all.  The walk reads no descriptor: one of another running
// thread's slabs may be released and its descriptor reused at any time.
// Only the caller knows when reading one is safe (its own allocator's, an
// idle one's under the pool lock).

#include "slab_meta.h"

namespace snmalloc
{
  struct ChunkStart
  {
    void* base;
    uintptr_t owner; // the pagemap entry's: an allocator, or a tag
    uintptr_t meta;

    // A slab of a thread's allocator (owner: the allocator); meta is its
    // descriptor.
    bool is_thread_slab() const
    {
      return owner != 0 && !is_tag(owner);
    }

    bool is_large_run() const
    {
      return is_tag(owner) && tag_kind(owner) == ChunkKind::Large;
    }
  };

  // Apply f(const ChunkStart&) to every chunk where something starts.
  template<typename F>
  void for_each_chunk_start(F&& f)
  {
    size_t end = backend.chunks_carved();
    uintptr_t previous_owner = 0, previous_meta = 0;
    for (size_t i = 0; i < end; i++)
    {
      const PagemapEntry& e = pagemap.entries[i];
      uintptr_t owner = e.get_owner();
      uintptr_t meta = e.get_meta();
      bool slab_entry = !is_tag(owner) ||
        (tag_kind(owner) == ChunkKind::Sampled && tag_payload(owner) == 0);
      bool continues_slab = slab_entry && owner == previous_owner && meta == previous_meta;
      previous_owner = owner;
      previous_meta = meta;
      if (owner == 0 || continues_slab)
        continue;
      f(ChunkStart{pagemap.chunk_address(i), owner, meta});
    }
  }
} // namespace snmalloc
