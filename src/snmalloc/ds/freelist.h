#pragma once
// Layer ds: intrusive singly linked lists threaded through free objects.

#include "encoded_link.h"
#include "sizeclass.h"

#include <atomic>

namespace snmalloc
{
  // Objects on one list of free objects are of one slab (a slab's free list,
  // a thread's fast list, a batch), and no slab is larger than this: a link
  // reaching farther, or to a pointer no object has, is corrupt.
  constexpr size_t LINK_REACH_BITS = bits::log2_ceil(slab_size_compute(config::MAX_SMALL_SIZE));

  // A free object's first word links it to the next, encoded (see
  // ds/encoded_link.h).  The link is atomic only because free objects also
  // travel through the cross-thread message queue; relaxed accesses compile
  // to plain loads and stores.  In the checks build the second word holds a
  // mark while the object is free (every object has at least 16 bytes).
  struct FreeObject
  {
    std::atomic<uintptr_t> next;

    static FreeObject* from(void* p)
    {
      return static_cast<FreeObject*>(p);
    }

    // The link, unchecked: for lists of objects of many slabs, whose
    // readers check each object themselves.
    FreeObject* next_relaxed() const
    {
      return decode_link<FreeObject>(next.load(std::memory_order_relaxed), this);
    }

    // The link of a list of one slab's objects.  The checks build stops
    // at a link that cannot be one (see LINK_REACH_BITS): one differing
    // from this object's address above the reach, or not aligned as this
    // object is (to MIN_ALLOC_SIZE), in one mask.
    SNMALLOC_FAST_PATH FreeObject* next_object() const
    {
      FreeObject* n = next_relaxed();
      if constexpr (config::checks)
      {
        constexpr uintptr_t stray_bits =
          ~((uintptr_t(1) << LINK_REACH_BITS) - 1) | (config::MIN_ALLOC_SIZE - 1);
        uintptr_t stray = (reinterpret_cast<uintptr_t>(n) ^ reinterpret_cast<uintptr_t>(this)) & stray_bits;
        if (SNMALLOC_UNLIKELY(n != nullptr && stray != 0))
          report_corrupt_link(this);
      }
      return n;
    }

    void set_next(FreeObject* n)
    {
      set_next(n, link_mask(this));
    }

    // The same, given link_mask(this): the checks build's free computes it
    // once for the mark and the link (the stores between the two would
    // make the compiler load the secret again).
    void set_next(FreeObject* n, uintptr_t mask)
    {
      next.store(reinterpret_cast<uintptr_t>(n) ^ mask, std::memory_order_relaxed);
    }

    // The checks build's free mark: set by a free and while the allocator
    // holds the object, cleared when it is handed out, so a free that finds
    // it is a double free (docs/design.md, the checks build).  Derived from
    // the secret and the address: no program data holds it by chance.
    std::atomic<uintptr_t>& mark_word()
    {
      return *reinterpret_cast<std::atomic<uintptr_t>*>(reinterpret_cast<char*>(this) + sizeof(next));
    }

    // Given link_mask(this), in each of these.
    void mark_free(uintptr_t mask)
    {
      mark_word().store(~mask, std::memory_order_relaxed);
    }

    bool marked_free(uintptr_t mask)
    {
      return mark_word().load(std::memory_order_relaxed) == ~mask;
    }

    void mark_free()
    {
      mark_free(link_mask(this));
    }

    bool marked_free()
    {
      return marked_free(link_mask(this));
    }

    void clear_mark()
    {
      mark_word().store(0, std::memory_order_relaxed);
    }
  };

  // A run of `count` free objects of one slab linked from `head`.
  struct Batch
  {
    FreeObject* head = nullptr;
    size_t count = 0;

    // Detach the first `n` objects (n <= count) and return them.
    Batch take_front(size_t n)
    {
      Batch front{head, n};
      if (n == 0)
      {
        front.head = nullptr;
        return front;
      }
      FreeObject* last = head;
      for (size_t i = 1; i < n; i++)
        last = last->next_object();
      head = last->next_object();
      last->set_next(nullptr);
      count -= n;
      return front;
    }

    FreeObject* pop()
    {
      FreeObject* p = head;
      head = p->next_object();
      count--;
      return p;
    }
  };
} // namespace snmalloc
