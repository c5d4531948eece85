#pragma once
// Layer mem: frees of objects owned by other allocators, batched per owner.
//
// Objects are chained per destination in a small direct-mapped table; a
// collision or a full cache posts the chains, each destination's with one
// atomic operation on the owner's message queue.  This keeps cross-thread
// frees off the owner's cache lines except once per batch.  A destination's
// objects are dealt round-robin onto a few chains (lanes) so that the owner
// can walk them in parallel (see ds/message_queue.h).

#include "../ds/ds.h"

namespace snmalloc
{
  // What the remote cache needs of an allocator: its inbox.
  struct RemoteInbox
  {
    MessageQueue queue;
  };

  class RemoteCache
  {
    static constexpr size_t SLOTS = 64;

  public:
    // Chains per destination: as many cache misses as the owner overlaps.
    static constexpr size_t LANES = MessageQueue::LANES;

  private:
    struct Slot
    {
      RemoteInbox* dest = nullptr;
      FreeObject* lanes[LANES] = {};
      FreeObject* tails[LANES] = {}; // each lane's last object, without CHAINS_APART
      size_t turn = 0;
    };

    Slot slots_[SLOTS];
    size_t cached_bytes_ = 0;

    static size_t slot_of(const RemoteInbox* dest)
    {
      uintptr_t a = reinterpret_cast<uintptr_t>(dest);
      return ((a >> 6) ^ (a >> 14)) & (SLOTS - 1);
    }

    static void post(Slot& s)
    {
      if constexpr (!MessageQueue::CHAINS_APART)
      {
        // A lane to a stack of its own (ds/message_queue.h).
        for (size_t i = 0; i < LANES; i++)
        {
          if (s.lanes[i] != nullptr)
            s.dest->queue.post(s.lanes[i], s.tails[i], i);
        }
        s = Slot{};
        return;
      }
      FreeObject* first = nullptr;
      FreeObject* last = nullptr;
      for (FreeObject* chain : s.lanes)
      {
        if (chain == nullptr)
          continue;
        if (first == nullptr)
          first = chain;
        else
          MessageQueue::link_chains(last, chain);
        last = chain;
      }
      s.dest->queue.post(first, last);
      s = Slot{};
    }

  public:
    // Cache `p` (of `size` bytes) for `dest`; true once the cache should be
    // flushed.
    bool add(RemoteInbox* dest, void* p, size_t size)
    {
      Slot& s = slots_[slot_of(dest)];
      if (s.dest != dest)
      {
        if (s.dest != nullptr)
          post(s);
        s.dest = dest;
      }
      size_t turn = s.turn++ % LANES;
      FreeObject*& lane = s.lanes[turn];
      FreeObject* f = FreeObject::from(p);
      if constexpr (!MessageQueue::CHAINS_APART)
      {
        if (lane == nullptr)
          s.tails[turn] = f;
      }
      f->set_next(lane);
      lane = f;
      cached_bytes_ += size;
      return cached_bytes_ >= config::REMOTE_CACHE_BYTES;
    }

    void flush()
    {
      for (Slot& s : slots_)
      {
        if (s.dest != nullptr)
          post(s);
      }
      cached_bytes_ = 0;
    }
  };
} // namespace snmalloc
