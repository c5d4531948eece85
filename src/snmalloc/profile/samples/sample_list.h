#pragma once
// Layer profile/samples, stage "keep": the live samples.
//
// A sampled object lives in the profile pool with its SampleRecord in a
// header just below it, so free() finds the record from the pointer alone.
// Each allocator owns a SampleList of the samples it took: recording touches
// only the sampling thread's own list.  A free on another thread follows
// the record's back-pointer and unlinks under that list's lock, which is
// otherwise contended only by a dump.  Lists belong to pooled allocators,
// not to OS threads, so samples of exited threads stay listed; every list
// is registered once, forever, for the dump to walk.

#include "../stacks/stack_table.h"

namespace snmalloc::profile
{
  struct SampleList;

  struct SampleRecord
  {
    // Bytes from the start of the pool block to the object, the record
    // being the last bytes of them; 0 when the object is a chunk run of its
    // own and the record a separate block, found through the pagemap.  It
    // is the record's first word so that it is also the block's first word
    // when the record starts the block, and the pool writes it there when
    // alignment puts the record further in: a pointer anywhere into the
    // block then finds the record (ProfilePool::object_holding).
    uint32_t lead;
    uint32_t site_id; // the stack table's (stack, object size)
    SampleRecord* prev;
    SampleRecord* next;
    SampleList* list;
    void* object;
    size_t allocated_size; // the size the object stands in for (its class)
    // CLOCK_MONOTONIC at the sample, to the nanosecond: the object's age
    // and, at its free, its lifetime.  The wall-clock time a view shows
    // is derived from it (Settings::wall_minus_monotonic_ns), so a sample
    // reads one clock.
    int64_t birth_ns;
    size_t interval; // R when it was sampled
    // What it adds to the live-heap estimate (more than 0), kept so that
    // the free takes off exactly that without computing the weight again
    // (an expm1, about 50 instructions a sample).
    int64_t bytes;
    uint32_t thread_id; // the allocating thread's OS id
    SampleMode mode; // how it was sampled: with `interval`, its weight
    // The record's last word, just below a pool object, and never more
    // than allocated_size: a write below the object (an underflow) changes
    // it first, and the free that finds it larger stops the program
    // (ProfilePool::is_live_object), as it does when `lead` at the block's
    // start was written over.  (A small number there also keeps `delete[]`
    // of a non-array object, which reads it as the element count, from
    // running destructors over the whole heap before the free is caught.)
    size_t requested_size;

    // A freed record points at itself: a second free of its object is told
    // from a free of a pointer into some object, whose "record" is bytes of
    // that object (zeros, say) and not self-referencing.
    void mark_freed()
    {
      object = this;
    }

    bool is_freed() const
    {
      return object == this;
    }

    // The record of an object whose record lies just below it.
    static SampleRecord* below(const void* object)
    {
      return reinterpret_cast<SampleRecord*>(
        reinterpret_cast<uintptr_t>(object) - sizeof(SampleRecord));
    }
  };

  // A line of its own: a free on another thread writes it (the lock, the
  // count), and it sits in the allocator beside state only its owner
  // touches, the held-back batches and the heap counts a refill updates.
  struct alignas(64) SampleList
  {
    SpinLock lock;
    SampleRecord* head = nullptr;
    // Changed under the lock; read without it to size a snapshot's buffer.
    std::atomic<size_t> count{0};
    // Samples ever inserted, for the metrics; under the lock too, in this
    // list's line, where a process-wide count would be a line that every
    // sampling thread writes.
    std::atomic<uint64_t> taken{0};
    SampleList* next_registered = nullptr;
    bool registered = false;
    // The freed record of one of this list's large samples (each a pool
    // block of its own), kept for its next one: a free leaves its record
    // here under the lock it takes anyway when the place is empty, and the
    // owner takes it without a lock, so neither takes the pool's lock (two
    // of the six lock round trips of a sampled large object's malloc and
    // free).  Only the owner empties it, only a free under the lock fills
    // it; one place, not a stack: a place refilled at each free serves as
    // many samples as a stack would.
    std::atomic<SampleRecord*> spare{nullptr};

    void insert(SampleRecord* r)
    {
      r->list = this;
      r->prev = nullptr;
      LockGuard g(lock);
      r->next = head;
      if (head != nullptr)
        head->prev = r;
      head = r;
      count.store(count.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
      taken.store(taken.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    }

    // Unlink r; with `keep`, also keep its record as the spare if there is
    // none.  Whether it was kept: if not, the caller gives it back.
    bool remove(SampleRecord* r, bool keep = false)
    {
      LockGuard g(lock);
      if (r->prev != nullptr)
        r->prev->next = r->next;
      else
        head = r->next;
      if (r->next != nullptr)
        r->next->prev = r->prev;
      count.store(count.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
      if (!keep || spare.load(std::memory_order_relaxed) != nullptr)
        return false;
      r->mark_freed();
      spare.store(r, std::memory_order_release); // the owner then writes it
      return true;
    }

    // The spare record, or nullptr; the owner's thread only.
    SampleRecord* take_spare()
    {
      SampleRecord* r = spare.load(std::memory_order_acquire);
      if (r != nullptr)
        spare.store(nullptr, std::memory_order_relaxed);
      return r;
    }
  };

  class SampleListRegistry
  {
    // Taken to register a list, and by fork's prefork handler for as long as
    // it holds every list's lock, so no list appears in between.
    SpinLock lock_;
    std::atomic<SampleList*> head_{nullptr};

  public:
    void add(SampleList* list)
    {
      LockGuard g(lock_);
      list->next_registered = head_.load(std::memory_order_relaxed);
      head_.store(list, std::memory_order_release);
    }

    template<typename F>
    void for_each(F&& f)
    {
      for (SampleList* l = head_.load(std::memory_order_acquire); l != nullptr;
           l = l->next_registered)
        f(*l);
    }

    // Live samples in every list (read without the locks: a moment's count).
    size_t total_count()
    {
      size_t n = 0;
      for_each([&](SampleList& l) { n += l.count.load(std::memory_order_relaxed); });
      return n;
    }

    // Spare records in every list (read without the locks).
    size_t total_spares()
    {
      size_t n = 0;
      for_each([&](SampleList& l) { n += l.spare.load(std::memory_order_relaxed) != nullptr ? 1 : 0; });
      return n;
    }

    // Samples ever taken in every list (lists are never unregistered).
    uint64_t total_taken()
    {
      uint64_t n = 0;
      for_each([&](SampleList& l) { n += l.taken.load(std::memory_order_relaxed); });
      return n;
    }

    void prefork() noexcept
    {
      lock_.hold_for_fork();
      for_each([](SampleList& l) { l.lock.hold_for_fork(); });
    }

    void postfork() noexcept
    {
      for_each([](SampleList& l) { l.lock.release_after_fork(); });
      lock_.release_after_fork();
    }
  };

  inline SampleListRegistry sample_lists;
} // namespace snmalloc::profile
