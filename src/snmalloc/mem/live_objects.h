#pragma once
// Layer mem: the live objects of one slab, for the heap census
// (global/heap_walk.h).  An object of a slab is free when it is on the
// slab's free list, untouched (never handed out), or on a list its
// allocator keeps apart from the slab: the thread's fast list of the
// class, a batch the profiler holds back.  Every other object is live.
// Reading the free list is the owner's right: the caller is the owner, or
// holds an idle allocator where no owner can run.

#include "slab_meta.h"

namespace snmalloc
{
  // The free objects an allocator keeps off its slabs, per class, with the
  // address range they span so that a slab outside it skips the lists (they
  // come from one slab or two: a refill's batch and what it held back).
  class DetachedFree
  {
  public:
    static constexpr size_t LISTS = 2;

  private:
    const FreeObject* lists_[NUM_SMALL_CLASSES][LISTS] = {};
    uintptr_t low_[NUM_SMALL_CLASSES] = {};
    uintptr_t high_[NUM_SMALL_CLASSES] = {};

  public:
    // Add list `which` of class sc.  Its objects are of sc's slabs, so the
    // walk stops after a slab's capacity of them (a double free may have
    // closed a cycle).
    void add(sizeclass_t sc, size_t which, const FreeObject* head)
    {
      lists_[sc][which] = head;
      size_t limit = MAX_CAPACITY;
      for (const FreeObject* f = head; f != nullptr && limit-- != 0; f = f->next_relaxed())
      {
        uintptr_t a = reinterpret_cast<uintptr_t>(f);
        if (low_[sc] == 0 || a < low_[sc])
          low_[sc] = a;
        if (a >= high_[sc])
          high_[sc] = a + 1;
      }
    }

    // The lists of sc, or none if no object of them lies in [base, end).
    const FreeObject* const* lists_in(sizeclass_t sc, uintptr_t base, uintptr_t end) const
    {
      if (high_[sc] <= base || low_[sc] >= end)
        return nullptr;
      return lists_[sc];
    }
  };

  // Which of a slab's objects are free, one bit each.
  class FreeIndices
  {
    uint64_t bits_[MAX_CAPACITY / 64] = {};
    uintptr_t base_;
    size_t size_;
    size_t capacity_;

  public:
    FreeIndices(uintptr_t base, sizeclass_t sc)
    : base_(base), size_(sizeclass_to_size(sc)), capacity_(sizeclasses.capacity[sc])
    {}

    // Mark the objects of a list that are this slab's.  Objects of other
    // slabs are passed over; at most a slab's capacity of links is followed.
    void mark_list(const FreeObject* head)
    {
      size_t limit = MAX_CAPACITY;
      for (const FreeObject* f = head; f != nullptr && limit-- != 0; f = f->next_relaxed())
      {
        uintptr_t offset = reinterpret_cast<uintptr_t>(f) - base_;
        size_t index = offset / size_;
        if (index < capacity_ && offset % size_ == 0)
          bits_[index / 64] |= uint64_t(1) << (index % 64);
      }
    }

    bool is_free(size_t index) const
    {
      return (bits_[index / 64] & (uint64_t(1) << (index % 64))) != 0;
    }
  };

  // Apply f(void* object, size_t usable_size) to each live object of the
  // slab `meta`, free ones known from its descriptor and `detached`.  The
  // objects are found before f first runs.
  template<typename F>
  void for_each_live_object(const SlabMeta& meta, const DetachedFree& detached, F&& f)
  {
    sizeclass_t sc = meta.sizeclass;
    uintptr_t base = meta.base;
    size_t size = sizeclass_to_size(sc);
    size_t touched = sizeclasses.capacity[sc] - meta.untouched;
    FreeIndices free(base, sc);
    free.mark_list(meta.free);
    if (const FreeObject* const* lists = detached.lists_in(sc, base, base + meta.slab_size()))
    {
      for (size_t i = 0; i < DetachedFree::LISTS; i++)
        free.mark_list(lists[i]);
    }
    for (size_t i = 0; i < touched; i++)
    {
      if (!free.is_free(i))
        f(reinterpret_cast<void*>(base + i * size), size);
    }
  }
} // namespace snmalloc
