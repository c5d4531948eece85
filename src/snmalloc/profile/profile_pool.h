#pragma once
// Layer profile, stage "keep": the profile pool, a secondary allocator for
// sampled objects.
//
// Small blocks come from slabs of an ordinary CoreAlloc (without profiling)
// whose pagemap entries say "Pool" instead of naming a thread's allocator:
// free()'s owner test therefore sends sampled objects off the fast path
// with no extra branch for ordinary ones.  Blocks are packed densely in
// those slabs, never a page per sample.  A block is [lead-in ending with
// the record][object], the object as aligned as an unsampled one.  Blocks too large
// for a slab are chunk runs tagged Pool.  Freed memory goes back through the
// usual slab release and backend decay.

#include "../mem/mem.h"
#include "sample_list.h"

namespace snmalloc::profile
{
  class ProfilePool
  {
    using PoolAlloc = CoreAlloc<NoProfiler>;

    SpinLock lock_;
    PoolAlloc core_{make_tag(ChunkKind::Pool, 0)};
    PoolAlloc::Local local_{};

    void* alloc_block(size_t bytes)
    {
      sizeclass_t sc = size_to_sizeclass(bytes);
      LockGuard g(lock_);
      FreeObject*& fast = local_.fast[sc];
      if (FreeObject* p = fast)
      {
        fast = p->next_relaxed();
        return p;
      }
      return core_.alloc_refill(fast, sc, bytes, MIN_ALLOC_ALIGN);
    }

    static constexpr size_t MIN_ALLOC_ALIGN = config::MIN_ALLOC_SIZE;

  public:
    // A block for an object of `size` bytes (a sizeclass or large size),
    // with a zeroed record below the object; nullptr if memory is
    // exhausted.  The object keeps the alignment an unsampled object of its
    // size would have (the largest power of two dividing `size`), and at
    // least `align`.  The record takes the lead-in before the object,
    // rounded up to that alignment: the block, a multiple of the alignment
    // in size, comes from a class (or chunk run) aligned to it.
    SampleRecord* alloc(size_t size, size_t align, bool zero)
    {
      size_t alignment = bits::natural_alignment(size);
      if (alignment < align)
        alignment = align;
      size_t lead = bits::align_up(sizeof(SampleRecord), alignment);
      size_t bytes = lead + size;
      bool large = bytes > config::MAX_SMALL_SIZE;
      void* block = large ?
        PoolAlloc::alloc_chunks_tagged(large_size(bytes, MIN_ALLOC_ALIGN), zero, ChunkKind::Pool) :
        alloc_block(bytes);
      if (block == nullptr)
        return nullptr;
      auto* record = SampleRecord::of(static_cast<char*>(block) + lead);
      std::memset(static_cast<void*>(record), 0, sizeof(SampleRecord));
      record->block = block;
      record->large_block = large;
      // free() looks up the object's chunk, which for a large block is
      // not the first.
      if (large && pagemap.chunk_index(record->object()) != pagemap.chunk_index(block))
        pagemap.entry_of(record->object()).set(make_tag(ChunkKind::Pool, 0), 0);
      if (zero && !large)
        std::memset(record->object(), 0, size);
      return record;
    }

    void dealloc(SampleRecord* record)
    {
      void* block = record->block;
      if (record->large_block)
      {
        if (pagemap.chunk_index(record->object()) != pagemap.chunk_index(block))
          pagemap.entry_of(record->object()).set(0, 0);
        PoolAlloc::dealloc_chunks_tagged(block, pagemap.entry_of(block).get_owner());
        return;
      }
      LockGuard g(lock_);
      core_.dealloc_local(
        block, reinterpret_cast<SlabMeta*>(pagemap.entry_of(block).get_meta()));
    }

    void prefork() noexcept
    {
      lock_.lock();
    }

    void postfork() noexcept
    {
      lock_.unlock();
    }
  };

  inline ProfilePool profile_pool;
} // namespace snmalloc::profile
