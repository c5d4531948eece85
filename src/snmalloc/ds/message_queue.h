#pragma once
// Layer ds: the inbox through which other threads return objects to their
// owning allocator.
//
// Many producers push whole linked batches with one successful CAS; the single
// consumer (the owner) takes everything with one exchange.  Order does not
// matter for frees, so no stub node or FIFO discipline is needed, and since
// the consumer only ever takes the whole list there is no ABA hazard.

#include "freelist.h"

namespace snmalloc
{
  class MessageQueue
  {
    std::atomic<FreeObject*> head_{nullptr};

  public:
    // Push the linked run first..last (last->next is overwritten).
    void post(FreeObject* first, FreeObject* last) noexcept
    {
      FreeObject* old = head_.load(std::memory_order_relaxed);
      do
      {
        last->set_next(old);
      } while (!head_.compare_exchange_weak(
        old, first, std::memory_order_release, std::memory_order_relaxed));
    }

    bool maybe_nonempty() const noexcept
    {
      return head_.load(std::memory_order_relaxed) != nullptr;
    }

    FreeObject* take_all() noexcept
    {
      return head_.exchange(nullptr, std::memory_order_acquire);
    }
  };
} // namespace snmalloc
