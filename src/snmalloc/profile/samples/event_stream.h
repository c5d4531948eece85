#pragma once
// Layer profile/samples: the raw event stream, births and deaths of sampled
// objects, for programs that want the samples themselves rather than a
// pprof file.
//
// A bounded multi-producer ring (one sequence number per slot): a thread
// that samples or frees a sampled object claims a slot with one CAS, and
// when the ring is full it counts a drop and goes on: the allocating thread
// never blocks and nothing grows.  One consumer drains it.  A ring, once
// made, is never unmapped (a producer may still be writing into it after
// stop); a restart makes a new one, with its own drop count.

#include "sample_list.h"

#include <new>

namespace snmalloc::profile
{
  enum class EventKind : uint32_t
  {
    Alloc = 1,
    Free = 2,
  };

  struct SampleView
  {
    uintptr_t address;
    size_t requested_size;
    size_t allocated_size;
    size_t interval;
    int64_t time_ns; // wall clock (CLOCK_REALTIME) when it was sampled
    int64_t birth_ns; // CLOCK_MONOTONIC when it was sampled
    uint32_t site_id; // the stack table's (stack, object size)
    uint32_t thread_id;
    SampleMode mode;
  };

  struct Event
  {
    EventKind kind;
    SampleView sample;
  };

  class EventRing
  {
    struct Slot
    {
      std::atomic<size_t> sequence;
      Event event;
    };

    size_t mask_;
    alignas(64) std::atomic<size_t> tail_{0};
    alignas(64) size_t head_ = 0; // consumer only
    std::atomic<uint64_t> dropped_{0};
    Slot* slots_;

  public:
    EventRing(Slot* slots, size_t capacity) : mask_(capacity - 1), slots_(slots)
    {
      for (size_t i = 0; i < capacity; i++)
        slots_[i].sequence.store(i, std::memory_order_relaxed);
    }

    static EventRing* create(size_t capacity)
    {
      capacity = bits::next_pow2(capacity < 2 ? 2 : capacity);
      size_t bytes = sizeof(EventRing) + 64 + capacity * sizeof(Slot);
      void* mem = profiler_regions.reserve(bytes, "event ring");
      if (mem == nullptr)
        return nullptr;
      auto* slots = reinterpret_cast<Slot*>(
        bits::align_up(reinterpret_cast<uintptr_t>(mem) + sizeof(EventRing), 64));
      return new (mem) EventRing(slots, capacity);
    }

    size_t capacity() const
    {
      return mask_ + 1;
    }

    void push(const Event& e)
    {
      size_t pos = tail_.load(std::memory_order_relaxed);
      for (;;)
      {
        Slot& slot = slots_[pos & mask_];
        size_t seq = slot.sequence.load(std::memory_order_acquire);
        if (seq == pos)
        {
          if (tail_.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed))
          {
            slot.event = e;
            slot.sequence.store(pos + 1, std::memory_order_release);
            return;
          }
        }
        else if (seq < pos)
        {
          dropped_.fetch_add(1, std::memory_order_relaxed);
          return; // full
        }
        else
        {
          pos = tail_.load(std::memory_order_relaxed);
        }
      }
    }

    // Single consumer.  Copies up to `max` events; returns how many.
    size_t drain(Event* out, size_t max)
    {
      size_t n = 0;
      while (n < max)
      {
        Slot& slot = slots_[head_ & mask_];
        if (slot.sequence.load(std::memory_order_acquire) != head_ + 1)
          break; // empty, or the producer is still writing
        out[n++] = slot.event;
        slot.sequence.store(head_ + capacity(), std::memory_order_release);
        head_++;
      }
      return n;
    }

    uint64_t dropped() const
    {
      return dropped_.load(std::memory_order_relaxed);
    }
  };

  inline std::atomic<EventRing*> event_ring{nullptr};
  // Taken by the C API's one reader and by start/stop against it; held
  // across fork() like every profiler lock (Profiler::prefork).
  inline SpinLock event_ring_lock;

  inline SampleView view_of(SampleRecord* r)
  {
    return SampleView{
      reinterpret_cast<uintptr_t>(r->object),
      r->requested_size,
      r->allocated_size,
      r->interval,
      r->birth_ns + settings.wall_minus_monotonic_ns.load(std::memory_order_relaxed),
      r->birth_ns,
      r->site_id,
      r->thread_id,
      r->mode};
  }

  inline void emit_event(EventKind kind, SampleRecord* r)
  {
    if (EventRing* ring = event_ring.load(std::memory_order_acquire))
      ring->push(Event{kind, view_of(r)});
  }
} // namespace snmalloc::profile
