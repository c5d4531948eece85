#pragma once
// Layer mem: the out-of-band descriptor of one slab.
//
// A slab's free objects are on its `free` list, or `untouched`: the objects
// at its end never handed out, not linked yet, so their pages are not
// touched before they are needed.  Refill takes the whole list at once, with
// the next step of untouched objects linked in, and puts the slab to sleep
// once none is left untouched: until `needed` more objects come back to it,
// there is no point in looking at it again.  Then it wakes and joins its
// class's available list, and `needed` counts the objects still out, so that
// reaching zero means the slab is entirely free and can be released.
//   sleeping: free objects = wake_threshold - needed      (untouched = 0)
//   awake:    free objects = capacity - needed            (untouched included)

#include "../backend/backend.h"

namespace snmalloc
{
  struct SlabMeta
  {
    // Written by the owner, on every local free.
    FreeObject* free = nullptr;
    uint32_t needed = 0;
    uint32_t untouched = 0;
    bool sleeping = false;
    SlabMeta* prev = nullptr; // on the owner's available list while awake
    SlabMeta* next = nullptr;
    // Fixed while the slab lives, and read by other threads on every remote
    // free: on a line of its own, so those reads do not miss each time the
    // owner has written the line above (perf: the sizeclass load was a third
    // of the remote free's samples in producer-consumer).
    alignas(64) sizeclass_t sizeclass = 0;
    uintptr_t base = 0;

    size_t slab_size() const
    {
      return size_t(1) << sizeclasses.slab_bits[sizeclass];
    }

    void init(void* slab_base, sizeclass_t sc)
    {
      base = reinterpret_cast<uintptr_t>(slab_base);
      sizeclass = sc;
      free = nullptr;
      untouched = sizeclasses.capacity[sc];
      sleeping = false;
      needed = 0; // all free: no object is out
    }

    // Take every free object, the next untouched ones linked in first, in
    // address order so the objects handed out together share pages.  The
    // slab sleeps unless some remain untouched.
    Batch take_all()
    {
      uint32_t capacity = sizeclasses.capacity[sizeclass];
      link_untouched(sizeclasses.untouched_step[sizeclass]);
      Batch b{free, capacity - needed - untouched};
      free = nullptr;
      if (untouched != 0)
      {
        needed = capacity - untouched; // awake: every touched object is out
        return b;
      }
      sleeping = true;
      needed = sizeclasses.wake_threshold[sizeclass];
      return b;
    }

    void link_untouched(uint32_t step)
    {
      uint32_t n = step < untouched ? step : untouched;
      uint32_t first = sizeclasses.capacity[sizeclass] - untouched;
      size_t size = sizeclass_to_size(sizeclass);
      for (uint32_t i = first + n; i-- > first;)
      {
        FreeObject* f = FreeObject::from(reinterpret_cast<void*>(base + i * size));
        f->set_next(free);
        free = f;
      }
      untouched -= n;
    }

    // Return one object; true when the slab needs attention (wake or release).
    SNMALLOC_FAST_PATH bool push(void* p)
    {
      FreeObject* f = FreeObject::from(p);
      f->set_next(free);
      free = f;
      return --needed == 0;
    }
  };

  // Intrusive doubly linked list of awake slabs of one class.
  struct SlabList
  {
    SlabMeta* head = nullptr;

    void insert(SlabMeta* s)
    {
      s->prev = nullptr;
      s->next = head;
      if (head != nullptr)
        head->prev = s;
      head = s;
    }

    void remove(SlabMeta* s)
    {
      if (s->prev != nullptr)
        s->prev->next = s->next;
      else
        head = s->next;
      if (s->next != nullptr)
        s->next->prev = s->prev;
      s->prev = s->next = nullptr;
    }

    bool only(const SlabMeta* s) const
    {
      return head == s && s->next == nullptr;
    }
  };
} // namespace snmalloc
