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
// The checks build links objects through the first word only, so the
// second word keeps its free mark (ds/freelist.h) while the object travels
// and a second free of it is seen at the free.  It keeps chains apart
// another way: one stack per lane of the sender's (mem/remote_cache.h),
// each one chain (a message's lane, its last object linked to the stack's
// previous head), so the owner still walks LANES chains at once.  (With one
// stack, the checks build's walk was one cache miss after another: 77% of
// the refill's CPU samples in perf-larson, 10% of all.)
//
// Many producers push linked runs of chains with one successful CAS (one
// per lane in the checks build); the single consumer (the owner) takes
// everything with one exchange (per stack).  Order does not matter for
// frees, so no stub node or FIFO discipline is needed, and since the
// consumer only ever takes the whole stack there is no ABA hazard.

#include "freelist.h"

namespace snmalloc
{
  class MessageQueue
  {
  public:
    // Chains the owner walks at once.
    static constexpr size_t LANES = 4;
    // Whether chains are kept apart in one stack (linked through a second
    // word); otherwise there is a stack per lane.
    static constexpr bool CHAINS_APART = !config::checks;
    static constexpr size_t STACKS = CHAINS_APART ? 1 : LANES;

  private:
    std::atomic<FreeObject*> heads_[STACKS] = {};

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
    // `first` to the object `last` (its link is overwritten) onto `stack`.
    void post(FreeObject* first, FreeObject* last, size_t stack = 0) noexcept
    {
      std::atomic<FreeObject*>& head = heads_[stack];
      FreeObject* old = head.load(std::memory_order_relaxed);
      do
      {
        if constexpr (CHAINS_APART)
          link_chains(last, old);
        else
          last->set_next(old);
      } while (!head.compare_exchange_weak(
        old, first, std::memory_order_release, std::memory_order_relaxed));
    }

    bool maybe_nonempty() const noexcept
    {
      for (const std::atomic<FreeObject*>& head : heads_)
      {
        if (head.load(std::memory_order_relaxed) != nullptr)
          return true;
      }
      return false;
    }

    // Every chain posted to `stack` so far, linked by next_chain.
    FreeObject* take_all(size_t stack = 0) noexcept
    {
      return heads_[stack].exchange(nullptr, std::memory_order_acquire);
    }
  };
} // namespace snmalloc
