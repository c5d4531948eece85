#pragma once
// Layer profile/guard, stage "keep": guarded slots, where sampled objects are
// placed against inaccessible pages so that heap bugs touching them fault
// at once (guarded sampling, in the manner of GWP-ASan).
//
// One fixed reservation of 2N slots for a limit of N guarded objects, made
// when guarding is first enabled and kept for the life of the process:
//
//   [guard page | data pages .......][guard page | data pages .......] ... [guard]
//    <------------ SLOT_BYTES ------>
//
// Everything is inaccessible (PROT_NONE) until used.  A guarded object
// commits (mprotect read-write) only the pages it spans, and is placed
// either right-aligned, ending where the next slot's guard page starts, so
// that reading or writing one byte past its usable size faults, or
// left-aligned, starting just after its slot's guard page, for underflows;
// the side is chosen at random.  Right alignment honours the object's
// alignment (the largest power of two dividing its size, at least the one
// asked for) by placing it at the highest address so aligned: a sizeclass
// size is a multiple of its natural alignment and the slot end is aligned
// to SLOT_BYTES, so the object ends exactly at the guard unless a larger
// alignment was asked for than its size has (aligned_alloc(4096, 48)),
// when the gap below the next multiple is left unprotected.  The usable
// size is the sizeclass size, as for every object, so an overflow past the
// requested size but within the usable size is no fault.
//
// On free the object's pages are made inaccessible again and given back
// to the OS (MADV_DONTNEED), and the slot joins the tail of a FIFO of free
// slots: with 2N slots and at most N live, it is reused only after N more
// guarded objects, so a use after free faults for that long.  The slot's
// metadata lives outside the slots and keeps the sample record (the
// allocation stack) and the free stack, for the fault report
// (guard_report.h).  The chunks are registered in the pagemap as Sampled,
// so free() sends guarded objects to the profiler's slow path.
//
// A guarded object costs about 10 us (the mprotects, the madvise and the
// fault of its fresh page; docs/performance.md), so at most `per_second`
// objects are guarded each second (default 1000: about 1% of a core);
// samples past the budget go to the profile pool.

#include "../../backend/backend.h"
#include "../../mem/no_profiler.h"
#include "../samples/sample_list.h"

#include <new>
#include <sys/mman.h>

namespace snmalloc::profile
{
  enum class SlotState : uint32_t
  {
    Free = 0,
    Live = 1,
    Freed = 2,
  };

  struct GuardedSlot
  {
    static constexpr size_t FREE_DEPTH = 32;

    SampleRecord record; // the sample's record: allocation stack, size, thread
    std::atomic<SlotState> state{SlotState::Free};
    uint32_t next_free = 0; // FIFO link, an index
    uintptr_t object = 0;
    size_t size = 0; // usable size
    uint32_t free_thread = 0;
    uint32_t free_depth = 0;
    uintptr_t free_frames[FREE_DEPTH] = {};
  };

  class GuardedSlots
  {
  public:
    static constexpr size_t SLOT_BYTES = size_t(128) * 1024;
    static constexpr size_t MAX_OBJECT = config::MAX_SMALL_SIZE;
    static_assert(SLOT_BYTES - Pal::PAGE_SIZE >= MAX_OBJECT);

  private:
    static constexpr uint32_t NONE = ~uint32_t(0);

    SpinLock lock_;
    // Of the reservation; 0 until the first enable.  Stored last, with
    // release, and read without the lock (slot_of, at every sampled free
    // and in the fault handler): whoever sees it sees meta_ and slots_.
    std::atomic<uintptr_t> base_{0};
    size_t slots_ = 0;
    GuardedSlot* meta_ = nullptr;
    uint32_t free_head_ = NONE, free_tail_ = NONE;
    size_t live_ = 0;
    std::atomic<size_t> limit_{0};
    std::atomic<size_t> per_second_{DEFAULT_GUARD_PER_SECOND};
    std::atomic<int64_t> window_start_ns_{0};
    std::atomic<size_t> window_count_{0};
    std::atomic<uint64_t> guarded_total_{0};
    // The live objects' usable bytes and pages, for the statistics.
    std::atomic<size_t> live_bytes_{0};
    std::atomic<size_t> live_pages_bytes_{0};
    uint64_t rng_ = 1;

    uintptr_t slot_base(size_t i) const
    {
      return base_.load(std::memory_order_relaxed) + i * SLOT_BYTES;
    }

    static uintptr_t page_down(uintptr_t a)
    {
      return a & ~(Pal::PAGE_SIZE - 1);
    }

    static uintptr_t page_up(uintptr_t a)
    {
      return bits::align_up(a, Pal::PAGE_SIZE);
    }

    void push_free_locked(uint32_t i)
    {
      meta_[i].next_free = NONE;
      if (free_tail_ == NONE)
        free_head_ = i;
      else
        meta_[free_tail_].next_free = i;
      free_tail_ = i;
    }

    // A coin for the side, under the lock.
    bool right_side_locked()
    {
      rng_ ^= rng_ << 13;
      rng_ ^= rng_ >> 7;
      rng_ ^= rng_ << 17;
      return (rng_ >> 32) & 1;
    }

    // Within this second's budget of mprotects?
    bool within_budget()
    {
      int64_t now = Pal::monotonic_ns();
      int64_t start = window_start_ns_.load(std::memory_order_relaxed);
      if (now - start >= 1000000000)
      {
        if (window_start_ns_.compare_exchange_strong(start, now, std::memory_order_relaxed))
          window_count_.store(0, std::memory_order_relaxed);
      }
      return window_count_.fetch_add(1, std::memory_order_relaxed) <
        per_second_.load(std::memory_order_relaxed);
    }

    // The reservation's bytes for `slots` slots: one chunk more at the end,
    // the last slot's right guard.
    static size_t span_bytes(size_t slots)
    {
      return slots * SLOT_BYTES + config::CHUNK_SIZE;
    }

    // The backend's chunks that hold it.
    static size_t chunk_bytes(size_t slots)
    {
      return bits::align_up(span_bytes(slots), config::CHUNK_SIZE);
    }

    bool reserve_locked(size_t limit)
    {
      size_t slots = 2 * limit;
      size_t bytes = span_bytes(slots);
      Backend::Chunks c = backend.alloc_chunks(chunk_bytes(slots), SLOT_BYTES);
      if (c.base == nullptr)
        return false;
      auto* meta = static_cast<GuardedSlot*>(profiler_regions.reserve(slots * sizeof(GuardedSlot), "guarded slots"));
      if (meta == nullptr)
        return false;
      (void)Pal::make_inaccessible(c.base, bytes);
      set_chunk_entries(c.base, bytes, make_tag(ChunkKind::Sampled, 0), 0);
      meta_ = meta;
      slots_ = slots;
      for (uint32_t i = 0; i < slots; i++)
      {
        new (&meta_[i]) GuardedSlot();
        push_free_locked(i);
      }
      rng_ = Pal::entropy64() | 1; // each run draws its own sides
      base_.store(reinterpret_cast<uintptr_t>(c.base), std::memory_order_release);
      return true;
    }

  public:
    // At most `limit` objects guarded at a time (0: none), `per_second` new
    // ones a second.  The reservation is sized by the first non-zero limit;
    // EBUSY for a larger one later, EINVAL beyond MAX_GUARD, ENOMEM if it
    // cannot be made.
    int configure(size_t limit, size_t per_second)
    {
      if (limit > MAX_GUARD || per_second == 0)
        return EINVAL;
      LockGuard g(lock_);
      if (limit != 0 && base_.load(std::memory_order_relaxed) == 0 && !reserve_locked(limit))
        return ENOMEM;
      if (2 * limit > slots_)
        return EBUSY;
      per_second_.store(per_second, std::memory_order_relaxed);
      limit_.store(limit, std::memory_order_release);
      return 0;
    }

    size_t limit() const
    {
      return limit_.load(std::memory_order_relaxed);
    }

    // What the statistics count: the live objects, their pages, and the
    // reservation (the backend's chunks, never resident but for the
    // objects' pages).
    GuardedBytes bytes() const
    {
      size_t reserved = base_.load(std::memory_order_acquire) == 0 ? 0 : chunk_bytes(slots_);
      return {
        live_bytes_.load(std::memory_order_relaxed),
        live_pages_bytes_.load(std::memory_order_relaxed),
        reserved};
    }

    // Objects guarded since the process started.
    uint64_t guarded_total() const
    {
      return guarded_total_.load(std::memory_order_relaxed);
    }

    // A guarded place for a sampled object of usable size `size`, with its
    // record; nullptr when guarding is off, the object is too big, N are
    // guarded already or this second's budget is spent.
    SampleRecord* alloc(size_t size, size_t align, bool zero)
    {
      if (limit_.load(std::memory_order_acquire) == 0 || size > MAX_OBJECT || !within_budget())
        return nullptr;
      uint32_t i;
      bool right;
      {
        LockGuard g(lock_);
        if (live_ >= limit_.load(std::memory_order_relaxed) || free_head_ == NONE)
          return nullptr;
        i = free_head_;
        free_head_ = meta_[i].next_free;
        if (free_head_ == NONE)
          free_tail_ = NONE;
        live_++;
        right = right_side_locked();
      }
      size_t alignment = bits::natural_alignment(size);
      if (alignment < align)
        alignment = align;
      if (alignment < config::MIN_ALLOC_SIZE)
        alignment = config::MIN_ALLOC_SIZE;
      uintptr_t data = slot_base(i) + Pal::PAGE_SIZE, end = slot_base(i) + SLOT_BYTES;
      uintptr_t start =
        right ? (end - size) & ~(alignment - 1) : bits::align_up(data, alignment);
      uintptr_t first_page = page_down(start);
      if (
        start < data || start + size > end ||
        ::mprotect(
          reinterpret_cast<void*>(first_page), page_up(start + size) - first_page,
          PROT_READ | PROT_WRITE) != 0)
      {
        LockGuard g(lock_);
        live_--;
        push_free_locked(i);
        return nullptr;
      }
      GuardedSlot& s = meta_[i];
      s.object = start;
      s.size = size;
      s.free_depth = 0;
      std::memset(static_cast<void*>(&s.record), 0, sizeof(SampleRecord));
      s.record.object = reinterpret_cast<void*>(start);
      if (zero)
        std::memset(reinterpret_cast<void*>(start), 0, size);
      s.state.store(SlotState::Live, std::memory_order_release);
      guarded_total_.fetch_add(1, std::memory_order_relaxed);
      live_bytes_.fetch_add(size, std::memory_order_relaxed);
      live_pages_bytes_.fetch_add(page_up(start + size) - first_page, std::memory_order_relaxed);
      return &s.record;
    }

    // The slot `a` lies in (its guard page included); nullptr outside.
    // Past the last slot: the trailing guard, counted as the last slot's.
    GuardedSlot* slot_of(uintptr_t a) const
    {
      uintptr_t base = base_.load(std::memory_order_acquire);
      if (base == 0 || a - base >= span_bytes(slots_))
        return nullptr;
      size_t i = (a - base) / SLOT_BYTES;
      return &meta_[i < slots_ ? i : slots_ - 1];
    }

    // The slot before `s` (whose object a fault in s's guard page may have
    // overrun), or nullptr.
    const GuardedSlot* slot_before(const GuardedSlot* s) const
    {
      return s == meta_ ? nullptr : s - 1;
    }

    // Free a live guarded object (its free stack already in `s`): its pages
    // become inaccessible and go back to the OS, its slot to quarantine.
    void dealloc(GuardedSlot& s)
    {
      uintptr_t first_page = page_down(s.object);
      size_t bytes = page_up(s.object + s.size) - first_page;
      (void)Pal::make_inaccessible(reinterpret_cast<void*>(first_page), bytes);
      live_bytes_.fetch_sub(s.size, std::memory_order_relaxed);
      live_pages_bytes_.fetch_sub(bytes, std::memory_order_relaxed);
      s.state.store(SlotState::Freed, std::memory_order_release);
      LockGuard g(lock_);
      live_--;
      push_free_locked(uint32_t(&s - meta_));
    }

    void prefork() noexcept
    {
      lock_.hold_for_fork();
    }

    void postfork() noexcept
    {
      lock_.release_after_fork();
    }

    // In a fork() child: sides of its own, not the parent's sequence again.
    void reseed() noexcept
    {
      LockGuard g(lock_);
      if (meta_ != nullptr)
        rng_ = Pal::entropy64() | 1;
    }
  };

  inline GuardedSlots guarded_slots;
} // namespace snmalloc::profile
