#pragma once
// Layer mem: the out-of-band descriptor of one slab.
//
// A slab's free objects are on its `free` list.  Refill takes the whole list
// at once and puts the slab to sleep: until `needed` more objects come back to
// it, there is no point in looking at it again.  Then it wakes and joins its
// class's available list, and `needed` counts the objects still out, so that
// reaching zero means the slab is entirely free and can be released.
//   sleeping: free objects = wake_threshold - needed
//   awake:    free objects = capacity - needed

#include "../backend/backend.h"

namespace snmalloc
{
  struct SlabMeta
  {
    // Written by the owner, on every local free.
    FreeObject* free = nullptr;
    uint32_t needed = 0;
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

    // Build the free list of a new slab, in address order so the first
    // objects handed out share pages.
    void init(void* slab_base, sizeclass_t sc)
    {
      base = reinterpret_cast<uintptr_t>(slab_base);
      sizeclass = sc;
      size_t size = sizeclass_to_size(sc);
      size_t n = sizeclasses.capacity[sc];
      FreeObject* head = nullptr;
      for (size_t i = n; i-- > 0;)
      {
        FreeObject* f = FreeObject::from(reinterpret_cast<void*>(base + i * size));
        f->set_next(head);
        head = f;
      }
      free = head;
      sleeping = false;
      needed = 0; // all free: no object is out
    }

    // Take every free object; the slab sleeps until enough come back.
    Batch take_all()
    {
      uint32_t capacity = sizeclasses.capacity[sizeclass];
      Batch b{free, capacity - needed};
      free = nullptr;
      sleeping = true;
      needed = sizeclasses.wake_threshold[sizeclass];
      return b;
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
