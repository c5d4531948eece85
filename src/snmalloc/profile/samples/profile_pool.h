#pragma once
// Layer profile/samples, stage "keep": the profile pool, a secondary allocator for
// sampled objects.
//
// Small blocks come from slabs of an ordinary CoreAlloc (without profiling)
// whose pagemap entries say "Sampled" instead of naming a thread's allocator:
// free()'s owner test therefore sends sampled objects off the fast path
// with no extra branch for ordinary ones.  Blocks are packed densely in
// those slabs, never a page per sample.  Large sampled objects are chunk
// runs tagged Sampled (see alloc).  Freed memory goes back through the usual
// slab release and backend decay.

#include "../../mem/mem.h"
#include "sample_list.h"

namespace snmalloc::profile
{
  class ProfilePool
  {
    using PoolAlloc = CoreAlloc<NoProfiler>;

    SpinLock lock_;
    PoolAlloc core_{make_tag(ChunkKind::Sampled, 0)};
    PoolAlloc::Local local_{};

    void* alloc_block(size_t bytes)
    {
      sizeclass_t sc = size_to_sizeclass(bytes);
      LockGuard g(lock_);
      FreeObject*& fast = local_.fast[sc];
      if (FreeObject* p = fast)
      {
        fast = p->next_relaxed();
        // The next sample's block is cold (freed at random): start loading
        // it now, long before that sample pops it (unprefetched, this pop's
        // miss was half of take_sample's time at rate=1).
        __builtin_prefetch(fast, 1);
        return p;
      }
      return core_.alloc_refill(fast, sc);
    }

    void dealloc_block(void* block)
    {
      LockGuard g(lock_);
      core_.dealloc_local(block);
    }

    // The pool block holding p; size 0 in a slab's slack after its last
    // block, or where no slab is.
    static ObjectExtent block_of(const PagemapEntry& e, const void* p)
    {
      auto* slab = reinterpret_cast<const SlabMeta*>(e.get_meta());
      if (slab == nullptr)
        return {};
      size_t index = slab->index_of(p);
      if (index >= sizeclasses.capacity[slab->sizeclass])
        return {};
      size_t size = sizeclass_to_size(slab->sizeclass);
      return {slab->base + index * size, size};
    }

    // Where a live block's object starts, from its first word (see
    // SampleRecord::lead), or 0 where it cannot be an offset.  A freed
    // block's first word is a free-list link: whatever offset it reads as
    // leads to no record naming that object.
    static size_t lead_of(ObjectExtent block)
    {
      uint32_t lead = *reinterpret_cast<const uint32_t*>(block.start);
      bool possible = lead >= sizeof(SampleRecord) && lead < block.size && lead % config::MIN_ALLOC_SIZE == 0;
      return possible ? lead : 0;
    }

    // Only the object and the lead: record_sample and SampleList::insert
    // write every other field before the record is listed or its object
    // handed out, so zeroing it first was 20 instructions a sample spent
    // on nothing.
    static SampleRecord* new_record(void* at, void* object, uint32_t lead)
    {
      auto* r = static_cast<SampleRecord*>(at);
      r->object = object;
      r->lead = lead;
      return r;
    }

  public:
    // A sampled object of `size` bytes (a sizeclass or large size) and its
    // record (see new_record); nullptr if memory is exhausted.  The object keeps the
    // alignment an unsampled object of its size would have (a small one
    // the largest power of two dividing `size`, a large one a chunk), and
    // at least `align`.
    //
    // Small objects: one slab block [lead-in ending with the record][object],
    // the lead-in rounded up to the alignment, so that the block, a multiple
    // of the alignment in size, comes from a class aligned to it.
    // Objects that would not fit a slab that way are a chunk run of their
    // own, exactly as an unsampled large object, with the record in a small
    // block named by the run's pagemap entry: a lead-in there would add a
    // chunk to the run and, when the run was a power of two, doubled it
    // (measured on large-object churn: nearly twice the resident set).
    // That block is a spare of `list` (the sampling allocator's) when it
    // has one set aside.
    SampleRecord* alloc(size_t size, size_t align, bool zero, SampleList& list)
    {
      size_t alignment = bits::natural_alignment(size);
      if (alignment < align)
        alignment = align;
      size_t lead = bits::align_up(sizeof(SampleRecord), alignment);
      if (lead + size <= config::MAX_SMALL_SIZE)
      {
        void* block = alloc_block(lead + size);
        if (block == nullptr)
          return nullptr;
        void* object = static_cast<char*>(block) + lead;
        if (zero)
          std::memset(object, 0, size);
        SampleRecord* r = new_record(SampleRecord::below(object), object, uint32_t(lead));
        // The block's first word says where its record is (object_holding);
        // when the record starts the block, this is the record's own field.
        *static_cast<uint32_t*>(block) = r->lead;
        return r;
      }
      void* record = list.take_spare();
      if (record == nullptr)
        record = alloc_block(sizeof(SampleRecord));
      if (record == nullptr)
        return nullptr;
      auto* r = new_record(record, nullptr, 0);
      // A large object, only the asked alignment: an unsampled one has no
      // more (it is packed at any chunk), and a run aligned further is
      // placed by power-of-two blocks instead (large-churn sampled at
      // 512 KiB: peak RSS 143.0 MiB so, 108.9 with packing).  An object of
      // a small class too big for its lead-in keeps its class's alignment,
      // which aligned allocation relies on.
      size_t run_alignment = size <= config::MAX_SMALL_SIZE ? alignment : align;
      r->object = large_run::alloc(
        size, run_alignment, zero, ChunkKind::Sampled, reinterpret_cast<uintptr_t>(r));
      if (r->object == nullptr)
      {
        dealloc_block(record);
        return nullptr;
      }
      return r;
    }

    // A record for the large run `run` as it stands, which becomes a
    // sampled object; nullptr if memory is exhausted.
    SampleRecord* adopt_run(void* run)
    {
      void* block = alloc_block(sizeof(SampleRecord));
      if (block == nullptr)
        return nullptr;
      SampleRecord* r = new_record(block, run, 0);
      large_run::retag(run, ChunkKind::Sampled, reinterpret_cast<uintptr_t>(r));
      return r;
    }

    // Give back the record of a large sampled run (freed, or staying with a
    // record from adopt_run).
    void dealloc_record(SampleRecord* record)
    {
      record->mark_freed();
      dealloc_block(record);
    }

    // The record of a pool object (whose chunk's entry is tagged Sampled),
    // given that chunk's entry `e`.
    static SampleRecord* record_of(const void* object, const PagemapEntry& e)
    {
      if (tag_payload(e.get_owner()) != 0)
        return reinterpret_cast<SampleRecord*>(e.get_meta());
      return SampleRecord::below(object);
    }

    static SampleRecord* record_of(const void* object)
    {
      return record_of(object, pagemap.entry_of(object));
    }

    // The record of a live sampled object `p`, for freeing it; a pointer
    // that is not one stops the program.  A freed record stays marked (the
    // pool's free-list link overwrites only its first word), so freeing it
    // again is recognised until its block is reused.  The record is read
    // only when it lies in p's own pool block.
    // One pagemap lookup serves the test and the record (three did: 25
    // instructions a sampled free of a large object).
    static SampleRecord* live_record_of(void* p)
    {
      BadFree kind;
      const PagemapEntry& e = pagemap.entry_of(p);
      if (!is_live_object(p, e, kind))
        report_bad_free(kind, p);
      return record_of(p, e);
    }

    // The live pool object holding p, anywhere in it: its start and the
    // size it stands in for, as an unsampled object of its class would
    // report them; {} in a block's lead-in, a freed block or a record's own
    // block.  A large sampled run is found from its first chunk, as an
    // unsampled one is.  Reads only p's own block, whatever p is.
    static ObjectExtent object_holding(const void* p)
    {
      const PagemapEntry& e = pagemap.entry_of(p);
      if (tag_payload(e.get_owner()) != 0)
      {
        auto* r = reinterpret_cast<const SampleRecord*>(e.get_meta());
        return {reinterpret_cast<uintptr_t>(r->object), large_run::bytes_of_tag(e.get_owner())};
      }
      ObjectExtent block = block_of(e, p);
      size_t lead = block.size == 0 ? 0 : lead_of(block);
      if (lead == 0)
        return {};
      uintptr_t object = block.start + lead;
      const SampleRecord* r = SampleRecord::below(reinterpret_cast<void*>(object));
      if (reinterpret_cast<uintptr_t>(r->object) != object || reinterpret_cast<uintptr_t>(p) < object)
        return {};
      return {object, r->allocated_size};
    }

    // Whether p is where a live pool object starts; if not, `kind` says
    // what p is instead.  Live when object_holding(p) starts at p and the
    // header is whole.
    static bool is_live_object(const void* p, BadFree& kind)
    {
      return is_live_object(p, pagemap.entry_of(p), kind);
    }

    // The same, given p's pagemap entry `e`.
    static bool is_live_object(const void* p, const PagemapEntry& e, BadFree& kind)
    {
      kind = BadFree::Interior;
      if (tag_payload(e.get_owner()) != 0)
        return record_of(p, e)->object == p; // a run's record is live while its tag is
      // Every sampled object is 16-byte aligned, and its record, just below
      // it, 8-byte aligned: an unaligned p is no object, and reading "its
      // record" would be a misaligned access.
      if (reinterpret_cast<uintptr_t>(p) % config::MIN_ALLOC_SIZE != 0)
        return false;
      ObjectExtent block = block_of(e, p);
      if (block.size == 0)
      {
        kind = BadFree::Invalid;
        return false;
      }
      uintptr_t offset = reinterpret_cast<uintptr_t>(p) - block.start;
      if (offset < sizeof(SampleRecord))
        return false; // in the lead-in
      const SampleRecord* r = SampleRecord::below(p);
      bool named_by_record = r->object == p;
      bool named_by_lead = lead_of(block) == offset;
      // Whole, a header also has a sampling interval and live bytes (never
      // 0: the last 32 bytes below the object zeroed are caught) and no
      // more bytes asked for than given.
      bool whole =
        r->requested_size <= r->allocated_size && r->interval != 0 && r->bytes > 0;
      if (named_by_record && named_by_lead && whole)
        return true;
      // A freed record points at itself (the pool's free-list link
      // overwrites only the block's first words).  Where the record or
      // the block's lead says p starts the object but the header is not
      // whole, it was written over: from below the object, or past the
      // block before.
      if (r->is_freed())
        kind = BadFree::DoubleFree;
      else if (named_by_record || named_by_lead)
        kind = BadFree::HeaderOverwritten;
      return false;
    }

    // Give back a small sampled object, its record in its block (a large
    // one's run and record go separately: see Profiler::dealloc_sampled).
    void dealloc(SampleRecord* record)
    {
      void* object = record->object;
      record->mark_freed();
      char* block = static_cast<char*>(object) - record->lead;
      // The checks build zeroes freed objects (SlabMeta::POISON), sampled
      // ones to the end of their block: a read after free sees none of the
      // object's data.
      if constexpr (config::checks)
      {
        ObjectExtent b = block_of(pagemap.entry_of(block), block);
        Pal::fill(object, 0, b.start + b.size - reinterpret_cast<uintptr_t>(object));
      }
      dealloc_block(block);
    }

    // For the statistics (CoreAlloc::recount_available_slabs).
    void recount_slabs()
    {
      LockGuard g(lock_);
      core_.recount_available_slabs();
    }

    void prefork() noexcept
    {
      lock_.hold_for_fork();
    }

    void postfork() noexcept
    {
      lock_.release_after_fork();
    }
  };

  inline ProfilePool profile_pool;
} // namespace snmalloc::profile
