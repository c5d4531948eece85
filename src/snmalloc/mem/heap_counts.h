#pragma once
// Layer mem: what the heap holds, counted where the allocator already is on
// a slow path, never on the malloc/free fast paths.
//
// Small objects are counted per slab: the objects of a slab that are out
// (not on its free list, not untouched) are recounted from its descriptor
// when a refill takes its free list and when it is released, and the
// difference to its previous count goes to the owning allocator's per-class
// figure.  Frees in between are seen at the slab's next refill or release.
// So a slab's count is exact at those events and an upper bound between
// them, and the sum is an upper bound of the objects the program holds: it
// also counts objects waiting in threads' fast lists (at most one batch per
// class per thread) and in remote-free batches not yet handled by their
// owner.  (Recounting also when a slab wakes, or when the last slab of a
// class is all free but kept, made the figure tighter and cost 0.2
// instructions per malloc/free pair in scripts/bench/fastpath-count.sh's loop,
// which wakes and empties its slab every 512 pairs.)
//
// Large runs are counted exactly, at their allocation, resizing and free.
// Allocators register their counts on their first slab; a reader walks the
// registry (allocators are never destroyed) and sums.

#include "slab_meta.h"

#include <atomic>

namespace snmalloc
{
  // Process-wide figures: live bytes (small at slab events, large exactly)
  // and their high-water mark, and the large runs.
  class HeapTotals
  {
    std::atomic<int64_t> live_bytes_{0};
    std::atomic<int64_t> peak_live_bytes_{0};
    std::atomic<int64_t> large_bytes_{0};
    std::atomic<int64_t> large_runs_{0};

  public:
    void add_live(int64_t delta)
    {
      int64_t now = live_bytes_.fetch_add(delta, std::memory_order_relaxed) + delta;
      if (delta <= 0)
        return;
      int64_t peak = peak_live_bytes_.load(std::memory_order_relaxed);
      while (now > peak &&
             !peak_live_bytes_.compare_exchange_weak(peak, now, std::memory_order_relaxed))
      {}
    }

    void add_large(int64_t runs, int64_t bytes)
    {
      large_runs_.fetch_add(runs, std::memory_order_relaxed);
      large_bytes_.fetch_add(bytes, std::memory_order_relaxed);
      add_live(bytes);
    }

    int64_t peak_live_bytes() const
    {
      return peak_live_bytes_.load(std::memory_order_relaxed);
    }

    int64_t large_bytes() const
    {
      return large_bytes_.load(std::memory_order_relaxed);
    }

    int64_t large_runs() const
    {
      return large_runs_.load(std::memory_order_relaxed);
    }
  };

  inline HeapTotals heap_totals;

  // One allocator's small objects and slabs per class.  Written only by the
  // thread that holds the allocator (load and store, no read-modify-write);
  // read by anyone.
  class HeapCounts
  {
    std::atomic<int64_t> objects_[NUM_SMALL_CLASSES] = {};
    std::atomic<int64_t> slabs_[NUM_SMALL_CLASSES] = {};
    HeapCounts* next_registered_ = nullptr;
    bool registered_ = false;

    static inline std::atomic<HeapCounts*> registry_{nullptr};

    static void add(std::atomic<int64_t>& counter, int64_t delta)
    {
      counter.store(counter.load(std::memory_order_relaxed) + delta, std::memory_order_relaxed);
    }

    void register_once()
    {
      if (registered_)
        return;
      registered_ = true;
      HeapCounts* head = registry_.load(std::memory_order_relaxed);
      do
        next_registered_ = head;
      while (!registry_.compare_exchange_weak(head, this, std::memory_order_release));
    }

  public:
    void slab_created(sizeclass_t sc)
    {
      register_once();
      add(slabs_[sc], 1);
    }

    void slab_released(sizeclass_t sc)
    {
      add(slabs_[sc], -1);
    }

    // Bring the slab's count up to date (see the top of this file).
    void recount(SlabMeta* meta)
    {
      uint32_t out = meta->objects_out();
      int64_t delta = int64_t(out) - int64_t(meta->counted_out);
      if (delta == 0)
        return;
      meta->counted_out = static_cast<uint16_t>(out);
      add(objects_[meta->owner_sizeclass], delta);
      heap_totals.add_live(delta * int64_t(sizeclass_to_size(meta->owner_sizeclass)));
    }

    // recount just after a refill took the slab's list, when every object
    // but the untouched ones is out: mostly counted so already, at the
    // slab's previous refill (computing objects_out instead took 8 of a
    // refill's 65 instructions on perf-random-replace).  The usual refill
    // does not call this: SlabMeta::list_only sends a slab not counted
    // all out to the unusual one.
    void recount_taken(SlabMeta* meta)
    {
      if (meta->owner_capacity - meta->untouched != meta->counted_out)
        recount(meta);
    }

    int64_t objects(sizeclass_t sc) const
    {
      return objects_[sc].load(std::memory_order_relaxed);
    }

    int64_t slabs(sizeclass_t sc) const
    {
      return slabs_[sc].load(std::memory_order_relaxed);
    }

    template<typename F>
    static void for_each(F&& f)
    {
      for (HeapCounts* c = registry_.load(std::memory_order_acquire); c != nullptr;
           c = c->next_registered_)
        f(*c);
    }
  };
} // namespace snmalloc
