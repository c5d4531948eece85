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

#include <type_traits>

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
    // Each lane's last object: kept without CHAINS_APART only (the checks
    // build), whose lanes go to stacks of their own.
    struct LaneTails
    {
      FreeObject* last[LANES] = {};

      void set(size_t lane, FreeObject* f)
      {
        last[lane] = f;
      }

      FreeObject* of(size_t lane) const
      {
        return last[lane];
      }
    };

    struct NoLaneTails
    {
      void set(size_t, FreeObject*) {}

      FreeObject* of(size_t) const
      {
        return nullptr;
      }
    };

    using Tails = std::conditional_t<MessageQueue::CHAINS_APART, NoLaneTails, LaneTails>;

    // A line each in the default build, so that a slot's offset is its
    // index shifted (80 bytes took three instructions more a remote free).
    struct alignas(64) Slot
    {
      RemoteInbox* dest = nullptr;
      size_t turn = 0;
      FreeObject* lanes[LANES] = {};
      [[no_unique_address]] Tails tails;
    };

    Slot slots_[SLOTS];
    // Bytes the cache takes before it is flushed, counted down: an add
    // tests the sign of its subtraction, in place (as a borrow, the count
    // was loaded, subtracted from and stored: 2 instructions more).
    ptrdiff_t room_ = config::REMOTE_CACHE_BYTES;

    static void post(Slot& s)
    {
      if constexpr (!MessageQueue::CHAINS_APART)
      {
        // A lane to a stack of its own (ds/message_queue.h).
        for (size_t i = 0; i < LANES; i++)
        {
          if (s.lanes[i] != nullptr)
            s.dest->queue.post(s.lanes[i], s.tails.of(i), i);
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

    // Chain p onto the slot's next lane; the cache is flushed once full.
    SNMALLOC_FAST_PATH void push(Slot& s, void* p, size_t size)
    {
      size_t turn = s.turn++ % LANES;
      FreeObject*& lane = s.lanes[turn];
      FreeObject* f = FreeObject::from(p);
      if constexpr (!MessageQueue::CHAINS_APART)
      {
        if (lane == nullptr)
          s.tails.set(turn, f);
      }
      f->set_next(lane);
      lane = f;
      room_ -= static_cast<ptrdiff_t>(size);
      if (SNMALLOC_UNLIKELY(room_ < 0))
        flush();
    }

    // The slot of `dest` holds another destination's chains, or none.
    SNMALLOC_SLOW_PATH void push_to_claimed_slot(Slot& s, RemoteInbox* dest, void* p, size_t size)
    {
      if (s.dest != nullptr)
        post(s);
      s.dest = dest;
      push(s, p, size);
    }

  public:
    // Where the slot of `dest`'s objects lies in every cache, in bytes from
    // the first slot, which its slabs keep (SlabMeta::remote_slot): an
    // offset, not an index, is 2 instructions less a remote free.
    static uint32_t slot_of(const RemoteInbox* dest)
    {
      uintptr_t a = reinterpret_cast<uintptr_t>(dest);
      return static_cast<uint32_t>((((a >> 6) ^ (a >> 14)) & (SLOTS - 1)) * sizeof(Slot));
    }

    // Cache `p` (of `size` bytes) for `dest`, whose slot_of is `slot`.
    // Anything but the usual case is a tail call, so that the remote free
    // saves no registers.
    SNMALLOC_FAST_PATH void add(RemoteInbox* dest, uint32_t slot, void* p, size_t size)
    {
      Slot& s = *reinterpret_cast<Slot*>(reinterpret_cast<char*>(slots_) + slot);
      if (SNMALLOC_UNLIKELY(s.dest != dest))
        return push_to_claimed_slot(s, dest, p, size);
      push(s, p, size);
    }

    SNMALLOC_SLOW_PATH void flush()
    {
      for (Slot& s : slots_)
      {
        if (s.dest != nullptr)
          post(s);
      }
      room_ = config::REMOTE_CACHE_BYTES;
    }
  };
} // namespace snmalloc
