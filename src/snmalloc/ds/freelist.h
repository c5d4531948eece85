#pragma once
// Layer ds: intrusive singly linked lists threaded through free objects.

#include "../ds_core/ds_core.h"

#include <atomic>

namespace snmalloc
{
  // A free object's first word links it to the next.  The link is atomic only
  // because free objects also travel through the cross-thread message queue;
  // relaxed accesses compile to plain loads and stores.
  struct FreeObject
  {
    std::atomic<FreeObject*> next;

    static FreeObject* from(void* p)
    {
      return static_cast<FreeObject*>(p);
    }

    FreeObject* next_relaxed() const
    {
      return next.load(std::memory_order_relaxed);
    }

    void set_next(FreeObject* n)
    {
      next.store(n, std::memory_order_relaxed);
    }
  };

  // A run of `count` free objects linked from `head`.
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
        last = last->next_relaxed();
      head = last->next_relaxed();
      last->set_next(nullptr);
      count -= n;
      return front;
    }

    FreeObject* pop()
    {
      FreeObject* p = head;
      head = p->next_relaxed();
      count--;
      return p;
    }
  };
} // namespace snmalloc
