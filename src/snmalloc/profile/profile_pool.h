#pragma once
// Layer profile, stage "keep": the profile pool, a secondary allocator for
// sampled objects.
//
// Small blocks come from slabs of an ordinary CoreAlloc (without profiling)
// whose pagemap entries say "Pool" instead of naming a thread's allocator:
// free()'s owner test therefore sends sampled objects off the fast path
// with no extra branch for ordinary ones.  Blocks are packed densely in
// those slabs, never a page per sample.  A block is [record][object], the
// object placed at the alignment the caller asked for.  Blocks too large
// for a slab are chunk runs tagged Pool.  Freed memory goes back through the
// usual slab release and backend purge.

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
    // A block for an object of `size` bytes aligned to `align`, with a
    // zeroed record below the object; nullptr if memory is exhausted.
    SampleRecord* alloc(size_t size, size_t align, bool zero)
    {
      if (align < MIN_ALLOC_ALIGN)
        align = MIN_ALLOC_ALIGN;
      size_t bytes = sizeof(SampleRecord) + (align - MIN_ALLOC_ALIGN) + size;
      bool large = bytes > config::MAX_SMALL_SIZE;
      void* block = large ?
        PoolAlloc::alloc_chunks_tagged(large_size(bytes, MIN_ALLOC_ALIGN), zero, ChunkKind::Pool) :
        alloc_block(bytes);
      if (block == nullptr)
        return nullptr;
      uintptr_t object =
        bits::align_up(reinterpret_cast<uintptr_t>(block) + sizeof(SampleRecord), align);
      auto* record = SampleRecord::of(reinterpret_cast<void*>(object));
      std::memset(static_cast<void*>(record), 0, sizeof(SampleRecord));
      record->block = block;
      record->large_block = large;
      // free() looks up the object's chunk, which for an aligned large
      // block need not be the first.
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
