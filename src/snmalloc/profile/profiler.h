#pragma once
// Layer profile: the Profiler policy, the hooks through which sampling
// enters the allocator (the interface is described in mem/no_profiler.h).
// Every hook runs on a slow path.

#include "core/sampler.h"
#include "guard/guarded_free.h"
#include "samples/profile_pool.h"
#include "samples/sample_life.h"

namespace snmalloc::profile
{
  // A new sampled object, in a guarded slot if one is to be had, else from
  // the profile pool; nullptr when record_sample drops the sample.
  inline void* take_sample(
    SampleList& list, size_t requested, size_t size, size_t align, bool zero, SampleRate rate)
  {
    SampleRecord* r = record_sample(list, asked_size(requested), size, rate, [&](SampleList& into) {
      if (SampleRecord* guarded = guarded_slots.alloc(size, align, zero))
        return guarded;
      return profile_pool.alloc(size, align, zero, into);
    });
    return r == nullptr ? nullptr : r->object;
  }

  struct Profiler
  {
    static constexpr bool enabled = true;

    class CoreState
    {
      // What counting_epoch_ holds for a class that holds a batch back: an
      // epoch the settings never reach (they start at 1).
      static constexpr uint64_t NOT_COUNTING = 0;

      Sampler sampler_;
      // Per class, the settings' epoch while this thread samples by them and
      // the class holds no batch back: then its refill has nothing to do but
      // count the batch (sample_due, split).  Otherwise (NOT_COUNTING, or an
      // old epoch after a start() or stop()), the class's next refill takes
      // the slow path.  Per class, so that a batch held back in one class
      // sends no other class's refills there.
      uint64_t counting_epoch_[NUM_SMALL_CLASSES] = {};
      Batch held_[NUM_SMALL_CLASSES];
      // The epoch under which each held batch's point was drawn.
      uint64_t held_epoch_[NUM_SMALL_CLASSES] = {};
      SampleList samples_;

      // Pick up start()/stop(); false while profiling is stopped.
      bool refresh()
      {
        uint64_t seen = sampler_.epoch();
        bool sampling = sampler_.refresh();
        if (SNMALLOC_UNLIKELY(sampler_.epoch() != seen))
        {
          for (size_t c = 0; c < NUM_SMALL_CLASSES; c++)
            counting_epoch_[c] = held_[c].head == nullptr ? sampler_.epoch() : NOT_COUNTING;
        }
        return sampling;
      }

      void hold(sizeclass_t sc, Batch b)
      {
        held_[sc] = b;
        held_epoch_[sc] = sampler_.epoch();
        counting_epoch_[sc] = NOT_COUNTING;
      }

      Batch unhold(sizeclass_t sc)
      {
        Batch b = held_[sc];
        held_[sc] = {};
        counting_epoch_[sc] = sampler_.epoch();
        return b;
      }

      template<typename Core>
      static void give_back(Core& core, Batch& b)
      {
        core.dealloc_local_list(b.head);
        b = {};
      }

      // The slow paths take the allocator, not this: its address is in a
      // register already, and the refill then keeps nothing for them.

      // Not the common case: the settings changed, or `sc` holds a batch
      // back.  Whether it does.
      template<typename Core>
      SNMALLOC_SLOW_PATH static bool sample_due_slow(Core& core, sizeclass_t sc)
      {
        CoreState& self = core.profile();
        self.refresh();
        if (self.held_[sc].head != nullptr)
          return true;
        self.counting_epoch_[sc] = self.sampler_.epoch();
        return false;
      }

      // units_before_point said no: the batch reaches the next sample point,
      // or the sampler counts by class (sizeclass mode).  Count it as the
      // mode says, and keep back the objects from the point on.
      template<typename Core>
      SNMALLOC_SLOW_PATH static Batch split_at_point(Core& core, sizeclass_t sc, Batch b)
      {
        CoreState& self = core.profile();
        self.sampler_.uncount(sc, b.count);
        if (!self.refresh())
          return b;
        size_t before = self.sampler_.objects_before_point(sc, b.count);
        if (before == b.count)
          return b;
        Batch front = b.take_front(before);
        self.hold(sc, b);
        return front;
      }

    public:
      // On every refill, so inline, and in the common case one test: the
      // class counts by the settings' epoch.
      template<typename Core>
      SNMALLOC_FAST_PATH bool sample_due(Core& core, sizeclass_t sc)
      {
        if (SNMALLOC_LIKELY(settings.epoch.load(std::memory_order_acquire) == counting_epoch_[sc]))
          return false;
        return sample_due_slow(core, sc);
      }

      // The usual refill's test, before it takes a slab's list of `count`
      // objects: counted, if the class counts by the settings' epoch and
      // the batch ends before the next sample point; otherwise nothing is
      // counted and the refill takes the unusual path (sample_due, split).
      // So the usual refill calls nothing and saves no registers (its two
      // calls cost the profiling shim 55 instructions a refill against the
      // plain shim's 31 on perf-random-replace).
      SNMALLOC_FAST_PATH bool counted_before_point(sizeclass_t sc, size_t count)
      {
        if (SNMALLOC_UNLIKELY(settings.epoch.load(std::memory_order_acquire) != counting_epoch_[sc]))
          return false;
        if (SNMALLOC_LIKELY(sampler_.units_before_point(sc, count)))
          return true;
        sampler_.uncount(sc, count);
        return false;
      }

      // Count a new batch; keep back the objects from the next sample point
      // on.  Inline, the common case: a batch before the point.
      template<typename Core>
      SNMALLOC_FAST_PATH Batch split(Core& core, sizeclass_t sc, Batch b)
      {
        if (SNMALLOC_LIKELY(sampler_.units_before_point(sc, b.count)))
          return b;
        return split_at_point(core, sc, b);
      }

      // The fast list ran dry at a sample point: serve this allocation from
      // the pool, give back the object the point fell in, hand out the rest.
      template<typename Core>
      SNMALLOC_SLOW_PATH void* alloc_at_sample_point(
        Core& core, FreeObject*& fast, sizeclass_t sc, size_t size, size_t align)
      {
        bool sampling = refresh();
        if (held_epoch_[sc] != sampler_.epoch())
        {
          // The point was drawn under other settings, or is the parent's
          // in a fork() child (every worker forked from one server would
          // sample the same object): the batch is counted afresh.
          Batch again = split(core, sc, unhold(sc));
          if (again.head != nullptr)
          {
            void* p = again.pop();
            fast = again.head;
            return p;
          }
          // The new point is its first object: held again, as current.
        }
        Batch held = unhold(sc);
        FreeObject* point = held.pop();
        void* result = point;
        if (sampling)
        {
          size_t s = sizeclass_to_size(sc);
          if (void* p = take_sample(samples_, size, s, align, false, sampler_.rate()))
          {
            core.dealloc_local(point);
            result = p;
          }
        }
        if (held.head == nullptr)
          return result;
        // The unwinder may have allocated from this class while the sample
        // was taken, refilling `fast` or holding back a batch of its own
        // meanwhile: then the rest, not yet counted, goes back to its slab
        // rather than over them.
        if (fast != nullptr || held_[sc].head != nullptr)
        {
          give_back(core, held);
          return result;
        }
        fast = split(core, sc, held).head;
        return result;
      }

      // large_before_point said no: the object reaches the next sample
      // point, the settings changed, or the sampler counts by stratum
      // (sizeclass mode).  Count it as the mode says; sample it if it
      // holds the point.
      SNMALLOC_SLOW_PATH void* alloc_large_at_point(size_t size, size_t s, size_t align, bool zero)
      {
        if (!(refresh() && sampler_.large_contains_point(s)))
          return nullptr;
        return take_sample(samples_, size, s, align, zero, sampler_.rate());
      }

      // On every large allocation, so inline, and in the common case a
      // test of the settings' epoch and a subtraction: the object lies
      // before the next sample point (out of line, with the sample's
      // registers saved on every call, this cost 56 instructions a large
      // allocation).  The sampled object, or nullptr to allocate as usual.
      template<typename Core>
      SNMALLOC_FAST_PATH void* alloc_large(Core&, size_t size, size_t align, bool zero)
      {
        size_t s = large_size(size);
        if (SNMALLOC_LIKELY(settings.epoch.load(std::memory_order_acquire) == sampler_.epoch()))
        {
          if (SNMALLOC_LIKELY(sampler_.large_before_point(s)))
            return nullptr;
          sampler_.uncount_large(s);
        }
        return alloc_large_at_point(size, s, align, zero);
      }

      // realloc grew the large run at `p` in place by `added` bytes, to
      // `bytes`.  The added bytes are allocated, so in bytes mode they
      // count down to the next sample point; if they hold one, the object
      // becomes a sample where it stands (a large object's record is out of
      // band), recorded at the realloc with its new size, and a sampled
      // one's old record goes as at a free.  What the site counts as
      // allocated is the added bytes, the object's new size only in the
      // live heap.  Otherwise a sampled object just takes its new size, and
      // the site of that size (StackTable::resized).  So an object of s
      // bytes, however it grew, is sampled with probability 1 - exp(-s/R),
      // as its weight assumes, and a buffer grown from small to huge in
      // place is not missed.  (A move instead is a new allocation, sampled
      // afresh for the whole size: the same probability.)  In the other
      // modes an object is sampled at its allocation with a probability its
      // size does not change.
      void grew_in_place(void* p, size_t requested, size_t added, size_t bytes, bool sampled)
      {
        SampleRecord* old = sampled ? ProfilePool::record_of(p) : nullptr;
        if (refresh() && sampler_.growth_contains_point(added) &&
            record_sample(
              samples_,
              requested,
              bytes,
              sampler_.rate(),
              [&](SampleList&) { return profile_pool.adopt_run(p); },
              added) != nullptr)
        {
          if (old != nullptr)
          {
            unlist(old);
            profile_pool.dealloc_record(old);
          }
          return;
        }
        if (old != nullptr)
        {
          ProfilerGuard guard; // a new peak copies the live set, allocating
          peak_profile.removed(old);
          uint32_t site = stack_table.resized(old->site_id, bytes, requested);
          int64_t weighed = sample_bytes(old->mode, bytes, old->interval);
          {
            // As a snapshot of the live set reads them.
            LockGuard g(old->list->lock);
            old->site_id = site;
            old->requested_size = requested;
            old->allocated_size = bytes;
            old->bytes = weighed;
          }
          peak_profile.added(weighed, {old->mode, old->interval});
        }
      }

      // Thread exit: held-back objects return to their slabs.  The sample
      // list stays with the pooled allocator.
      template<typename Core>
      void flush(Core& core)
      {
        for (Batch& b : held_)
          give_back(core, b);
      }

      // The free objects held back in sc, for a census of their slab.
      const FreeObject* held_objects(sizeclass_t sc) const
      {
        return held_[sc].head;
      }
    };

    // alloc_aligned serves `rounded` bytes for a request of `asked` while
    // one of these lives (asked_size).
    class AskedFor
    {
    public:
      AskedFor(size_t rounded, size_t asked)
      {
        aligned_request = {rounded, asked};
      }

      ~AskedFor()
      {
        aligned_request.rounded = 0;
      }

      AskedFor(const AskedFor&) = delete;
      AskedFor& operator=(const AskedFor&) = delete;
    };

    // alloc_slow was entered from `return_address` (see stack_capture.h).
    static void entered_slow_path(void* return_address)
    {
      slow_path_return_address = reinterpret_cast<uintptr_t>(return_address);
      sample_walk_start = {};
    }

    // The same, from a sampling hook (small or large objects), whose frame
    // (its frame pointer: it must keep one) is where a sample's walk may
    // start.
    static void entered_sample_path(void* return_address, void* hook_frame)
    {
      slow_path_return_address = reinterpret_cast<uintptr_t>(return_address);
      auto* frame = static_cast<uintptr_t*>(hook_frame);
      sample_walk_start = {reinterpret_cast<uintptr_t>(frame), frame[1]};
    }

    // Out of line: slow paths, and inlined into a caller's `delete` GCC
    // would warn about reading below an object it saw allocated.
    SNMALLOC_SLOW_PATH static void dealloc_sampled(void* p)
    {
      if (GuardedSlot* slot = guarded_slots.slot_of(reinterpret_cast<uintptr_t>(p)))
      {
        dealloc_guarded(*slot, p);
        return;
      }
      SampleRecord* r = ProfilePool::live_record_of(p);
      // The site's lifetime cell is counted last, its load started first:
      // cold, it then arrives while the object goes back.
      LifetimeTable::Freed end = lifetime_end(r);
      lifetime_table.prefetch(end);
      if (r->lead == 0)
      {
        // A run of its own: its record block goes back to its list, for
        // that allocator's next large sample, unless the list has enough.
        void* run = r->object;
        if (!unlist(r, true))
          profile_pool.dealloc_record(r);
        large_run::dealloc(run);
      }
      else
      {
        unlist(r);
        profile_pool.dealloc(r);
      }
      lifetime_table.freed(end);
    }

    // Whether p is where a live sampled object starts; only then has a
    // sized delete a size to compare (an interior pointer's "record" is
    // part of the object).
    SNMALLOC_SLOW_PATH static bool starts_sample(const void* p)
    {
      if (const GuardedSlot* slot = guarded_slots.slot_of(reinterpret_cast<uintptr_t>(p)))
        return slot->object == reinterpret_cast<uintptr_t>(p);
      BadFree kind;
      return ProfilePool::is_live_object(p, kind);
    }

    // The sampled object holding p, anywhere in it (see
    // ProfilePool::object_holding).  A large sampled run's own tag says its
    // size, also after it grew in place on a thread with no allocator
    // (whose profile state could not count it).
    SNMALLOC_SLOW_PATH static ObjectExtent sampled_object(const void* p)
    {
      if (const GuardedSlot* slot = guarded_slots.slot_of(reinterpret_cast<uintptr_t>(p)))
        return {slot->object, slot->size};
      return ProfilePool::object_holding(p);
    }

    // Memory the profiler holds for itself: the stack table, the sites'
    // lifetimes, the peak profile's copies, and the records of the live
    // samples and the lists' spares (which lie in profile-pool blocks, so
    // the heap statistics count them as live bytes too).
    static size_t own_bytes()
    {
      return stack_table.os_bytes() + lifetime_table.os_bytes() + peak_profile.own_bytes() +
        (sample_lists.total_count() + sample_lists.total_spares()) * sizeof(SampleRecord);
    }

    static GuardedBytes guarded_bytes()
    {
      return guarded_slots.bytes();
    }

    static uint64_t samples_dropped()
    {
      return settings.samples_dropped.load(std::memory_order_relaxed);
    }

    static void recount_pool_slabs()
    {
      profile_pool.recount_slabs();
    }

    // Every live sampled object, list by list, each under its lock: a free
    // on another thread waits for its list's visits to end.
    static void visit_samples(HeapVisitor visit)
    {
      sample_lists.for_each([&](SampleList& list) {
        LockGuard g(list.lock);
        for (SampleRecord* r = list.head; r != nullptr; r = r->next)
          visit(r->object, sampled_object(r->object).size);
      });
    }

    static int push_label(const char* key, const char* value)
    {
      return thread_labels.push(key, value);
    }

    static int pop_label()
    {
      return thread_labels.pop();
    }

    // Hold every profiler lock across fork() (see global/thread_alloc.h).
    // The event ring's lock first: its holder may read the stack table.
    static void prefork()
    {
      event_ring_lock.hold_for_fork();
      peak_profile.prefork();
      stack_table.prefork();
      lifetime_table.prefork();
      label_sets.prefork();
      sample_lists.prefork();
      profile_pool.prefork();
      guarded_slots.prefork();
      frame_rule_cache.prefork();
    }

    // In the child and the parent alike: the parent merely asks again once.
    static void postfork()
    {
      cached_thread_id = 0;
      frame_rule_cache.postfork();
      guarded_slots.postfork();
      profile_pool.postfork();
      sample_lists.postfork();
      label_sets.postfork();
      lifetime_table.postfork();
      stack_table.postfork();
      peak_profile.postfork();
      event_ring_lock.release_after_fork();
    }

    // In the child only: a new epoch, so that its thread's sampler draws
    // from a new seed (Sampler::refresh), and new guarded sides.
    static void postfork_child()
    {
      postfork();
      guarded_slots.reseed();
      settings.epoch.fetch_add(1, std::memory_order_release);
    }
  };

  static_assert(profiler_contract_holds<Profiler>());
} // namespace snmalloc::profile
