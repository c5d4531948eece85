#pragma once
// Layer ds: the inbox through which other threads return objects to their
// owning allocator.
//
// A message is a chain: free objects linked through their first word, ending
// in nullptr.  The inbox is a stack of chains linked through the second word
// of each chain's first object (every object has at least 16 bytes).  Keeping
// chains apart lets the owner walk several at once: the walk is one cache
// miss per object (the objects were last written by the freeing thread), and
// misses on independent chains overlap where those along one chain cannot.
//
// The checks build keeps one chain: a message's objects and the messages
// are linked through the first word only, so the second word keeps its
// free mark (ds/freelist.h) while the object travels, and a second free of
// it is seen at the free.
//
// Many producers push linked runs of chains with one successful CAS; the
// single consumer (the owner) takes everything with one exchange.  Order does
// not matter for frees, so no stub node or FIFO discipline is needed, and
// since the consumer only ever takes the whole stack there is no ABA hazard.

#include "freelist.h"

namespace snmalloc
{
  class MessageQueue
  {
  public:
    // Whether chains are kept apart (linked through a second word).
    static constexpr bool CHAINS_APART = !config::checks;

  private:
    std::atomic<FreeObject*> head_{nullptr};

    // The second word of a chain's first object, encoded like a free list
    // link (ds/encoded_link.h); the owner checks every object it reads.
    static std::atomic<uintptr_t>& chain_link(FreeObject* chain)
    {
      return *reinterpret_cast<std::atomic<uintptr_t>*>(
        reinterpret_cast<char*>(chain) + sizeof(FreeObject));
    }

  public:
    // The chain after `chain` in a stack taken with take_all.
    static FreeObject* next_chain(FreeObject* chain)
    {
      if constexpr (!CHAINS_APART)
        return nullptr; // one chain holds everything
      std::atomic<uintptr_t>& link = chain_link(chain);
      return decode_link<FreeObject>(link.load(std::memory_order_relaxed), &link);
    }

    // Link `chain` in front of `rest`, to build a run of chains for post.
    static void link_chains(FreeObject* chain, FreeObject* rest)
    {
      std::atomic<uintptr_t>& link = chain_link(chain);
      link.store(encode_link(rest, &link), std::memory_order_relaxed);
    }

    // Push the run of chains from `first` to the chain `last` (its chain
    // link is overwritten), or without CHAINS_APART the one chain from
    // `first` to the object `last` (its link is overwritten).
    void post(FreeObject* first, FreeObject* last) noexcept
    {
      FreeObject* old = head_.load(std::memory_order_relaxed);
      do
      {
        if constexpr (CHAINS_APART)
          link_chains(last, old);
        else
          last->set_next(old);
      } while (!head_.compare_exchange_weak(
        old, first, std::memory_order_release, std::memory_order_relaxed));
    }

    bool maybe_nonempty() const noexcept
    {
      return head_.load(std::memory_order_relaxed) != nullptr;
    }

    // Every chain posted so far, linked by next_chain.
    FreeObject* take_all() noexcept
    {
      return head_.exchange(nullptr, std::memory_order_acquire);
    }
  };
} // namespace snmalloc
