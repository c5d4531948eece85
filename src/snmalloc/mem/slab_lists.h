#pragma once
// Layer mem: the lists an allocator keeps its slabs on, linked through the
// slabs' descriptors: the awake slabs of a class, and its dozing ones
// (the states are described at the top of slab_state.h).

#include "slab_meta.h"

namespace snmalloc
{
  // Intrusive doubly linked list of awake slabs of one class.  The head's
  // `prev` is not kept: remove tells the head by the list's pointer, so
  // the refill that puts the head to sleep and the wake that inserts a
  // slab store no null there (4 instructions a refill and wake on
  // perf-larson).
  struct SlabList
  {
    SlabMeta* head = nullptr;

    void insert(SlabMeta* s)
    {
      s->next = head;
      if (head != nullptr)
        head->prev = s;
      head = s;
    }

    // remove(s) of the head s, for a slab no longer on the list: its own
    // links are left as they are (insert sets them).
    void remove_head(const SlabMeta* s)
    {
      head = s->next;
    }

    void remove(SlabMeta* s)
    {
      if (head == s)
        head = s->next;
      else
        s->prev->next = s->next;
      if (s->next != nullptr)
        s->next->prev = s->prev;
      s->prev = s->next = nullptr;
    }

    bool only(const SlabMeta* s) const
    {
      return head == s && s->next == nullptr;
    }
  };

  // A queue of slabs, oldest first, linked through their prev and next,
  // which are free while they sleep.
  struct SlabQueue
  {
    SlabMeta* head = nullptr;
    SlabMeta* tail = nullptr;

    void push(SlabMeta* s)
    {
      s->next = nullptr;
      s->prev = tail;
      if (tail != nullptr)
        tail->next = s;
      else
        head = s;
      tail = s;
    }

    // Move all of `later`'s slabs to this queue's end.
    void append(SlabQueue& later)
    {
      if (later.head == nullptr)
        return;
      if (tail != nullptr)
      {
        tail->next = later.head;
        later.head->prev = tail;
      }
      else
        head = later.head;
      tail = later.tail;
      later.head = later.tail = nullptr;
    }

    // Unlink s, of this queue or of another one (where s is not an end).
    void unlink(SlabMeta* s)
    {
      (s->prev != nullptr ? s->prev->next : head) = s->next;
      (s->next != nullptr ? s->next->prev : tail) = s->prev;
      s->prev = s->next = nullptr;
    }
  };

  // The dozing slabs of one class: `ready` to be taken by a refill that
  // finds no awake slab, and `recent`, those that began to doze since the
  // class last took a new slab.  A refill that would take a new slab
  // takes the oldest ready one instead, and a new slab makes the recent
  // ones ready.  So a heap that grows while its slabs gather a few frees
  // each reuses them (a slab that did not wake in that time will not
  // soon), and one that holds steady wakes its slabs at their threshold,
  // in batches of that size: taking any dozing slab at once, the first
  // free's, perf-random-replace refilled twice as often, 13.9% more
  // instructions (callgrind, 4,000,000 operations).
  struct DozingSlabs
  {
    SlabQueue ready;
    SlabQueue recent;

    void push(SlabMeta* s)
    {
      recent.push(s);
    }

    void remove(SlabMeta* s)
    {
      (recent.head == s || recent.tail == s ? recent : ready).unlink(s);
    }

    // The oldest ready slab, out of the queue; nullptr if none.
    SlabMeta* take_ready()
    {
      SlabMeta* s = ready.head;
      if (s != nullptr)
        ready.unlink(s);
      return s;
    }

    // The class takes a new slab: the recent ones are ready.
    void class_grew()
    {
      ready.append(recent);
    }

    template<typename F>
    void for_each(F&& f)
    {
      for (SlabQueue* q : {&ready, &recent})
        for (SlabMeta* s = q->head; s != nullptr; s = s->next)
          f(s);
    }
  };
} // namespace snmalloc
