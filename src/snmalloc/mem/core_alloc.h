#pragma once
// Layer mem: the allocator proper: slabs per sizeclass, refill, local and
// remote frees, large allocations.
//
// Allocation code overview (fast paths in global/api.h, their slow paths
// in global/slow_paths.h; the rest here, out of line):
//
//   alloc(size)                         FAST: pop thread's fast list[sc]
//     -> alloc_refill_slow              a malloc's list empty: its refill
//        CoreAlloc::alloc_refill        (inline) an awake slab's whole list
//        -> alloc_refill_unusual        a message waiting, no awake slab,
//                                       untouched objects, counts to update:
//             handle_messages
//             profile: sample_due -> nullptr
//             take_all: awake slab's free list, else the oldest
//                       dozing slab's, else a new slab's
//             profile: split (hold back past the next sample point)
//        -> CoreAlloc::alloc_sample_due refill returned nullptr:
//             profile: sample_due -> alloc_at_sample_point
//     -> alloc_slow                     size large/zero, calloc's list empty
//        -> attach thread (first time) or borrow (after teardown)
//        -> the refill above, or
//        -> CoreAlloc::alloc_large      profile countdown, a chunk run (large_run.h)
//   dealloc(p)                          FAST: owner == this thread: slab push
//     -> slab_needs_attention           push made `needed` zero: wake/release
//     -> dealloc_not_mine(p, owner, meta) not ours, with the entry read
//        (a sized free's too, its size fitting; the others and realloc's
//        through dealloc_slow(p, entry)):
//        -> dealloc_remote              other allocator: batch (inline,
//                                       tail calls only), post when full
//        -> dealloc_not_in_slab         large_run::dealloc /
//                                       Profiler::dealloc_sampled / zero size
//   handle_messages -> take_messages    the inbox, 4 chains walked at once
//                                       (inbox_walk.h)

#include "heap_counts.h"
#include "inbox_walk.h"
#include "large_run.h"
#include "local_cache.h"
#include "no_profiler.h"
#include "remote_cache.h"
#include "slab_lists.h"
#include "zero_size.h"

#include <new>
#include <utility>

namespace snmalloc
{
  template<typename Profiler>
  class CoreAlloc : public RemoteInbox
  {
  public:
    using Local = LocalCache<CoreAlloc>;

    CoreAlloc* next_in_pool = nullptr;
    // In the pool, held by no thread (under the pool's lock).
    bool in_pool = false;

  private:
    uintptr_t owner_value_;
    SlabList available_[NUM_SMALL_CLASSES];
    // Per class, sleeping slabs with objects freed (mem/slab_lists.h).
    DozingSlabs dozing_[NUM_SMALL_CLASSES];
    // Per class: how its slabs fall asleep (mem/slab_state.h), watched from
    // a new slab on, until GROWING_WAKES slabs have woken at their
    // threshold since.  (Until the first such wake, a heap replacing its
    // objects at random grew by 11%, as when none is watched; by 1% so:
    // its early wakes ended the watch while it still grew.)
    SleepPlan sleep_plan_[NUM_SMALL_CLASSES] = {};
    uint8_t growing_wakes_[NUM_SMALL_CLASSES] = {};
    static constexpr uint8_t GROWING_WAKES = 16;
    // Per class of one-chunk slabs, the slab last kept with every object
    // back (slab_all_free); a refill may have taken it since.
    SlabMeta* kept_empty_[NUM_SMALL_CLASSES] = {};
    RemoteCache remote_;
    typename Profiler::CoreState profile_;
    HeapCounts counts_;

    SNMALLOC_SLOW_PATH SlabMeta* new_slab(sizeclass_t sc)
    {
      size_t slab_size = size_t(1) << sizeclasses.slab_bits[sc];
      Backend::Chunks c = backend.alloc_chunks(slab_size, slab_size);
      if (c.base == nullptr)
        return nullptr;
      void* m = backend.alloc_meta(sizeof(SlabMeta));
      if (m == nullptr)
      {
        backend.dealloc_chunks(c.base, slab_size);
        return nullptr;
      }
      SlabMeta* meta = new (m) SlabMeta();
      meta->init(c.base, sc);
      meta->zeroed = c.zeroed;
      meta->remote_slot = RemoteCache::slot_of(this);
      counts_.slab_created(sc);
      set_chunk_entries(
        c.base, slab_size, owner_value_, reinterpret_cast<uintptr_t>(meta));
      return meta;
    }

    void release_slab(SlabMeta* meta)
    {
      if (kept_empty_[meta->owner_sizeclass] == meta) // never left to dangle
        kept_empty_[meta->owner_sizeclass] = nullptr;
      void* base = reinterpret_cast<void*>(meta->base);
      size_t size = meta->slab_size();
      counts_.recount(meta);
      counts_.slab_released(meta->sizeclass);
      set_chunk_entries(base, size, 0, 0);
      backend.dealloc_chunks(base, size);
      backend.dealloc_meta(meta, sizeof(SlabMeta));
    }

    // dealloc_local(p) given p's pagemap entry and this allocator's owner
    // value, which the message walk holds in registers.
    SNMALLOC_FAST_PATH void
    dealloc_local_checked_owner(void* p, const PagemapEntry& entry, uintptr_t owner)
    {
      if (SNMALLOC_UNLIKELY(entry.get_owner() != owner))
        report_bad_free(BadFree::DoubleFree, p);
      auto* meta = reinterpret_cast<SlabMeta*>(entry.get_meta());
      // The default build's dealloc_local(p, meta) checks the object start.
      if (config::checks && !meta->is_object_start(p))
        report_bad_free(BadFree::Interior, p);
      dealloc_local(p, meta);
    }

    // The inbox walk's free of one object (mem/inbox_walk.h), with this
    // allocator's owner value, which the walk keeps in a register.
    struct FreeFromInbox
    {
      CoreAlloc* core;
      uintptr_t owner;

      SNMALLOC_FAST_PATH void operator()(FreeObject* f, const PagemapEntry& entry) const
      {
        core->dealloc_local_checked_owner(f, entry, owner);
      }
    };

  public:
    // `owner_value` is what this allocator's pagemap entries say: its own
    // address for a thread's allocator, a tag for the profile pool's.
    constexpr explicit CoreAlloc(uintptr_t owner_value) : owner_value_(owner_value)
    {
      for (sizeclass_t sc = 0; sc < NUM_SMALL_CLASSES; sc++)
        sleep_plan_[sc] = SleepPlan::until_threshold(sc);
    }

    uintptr_t owner_value() const
    {
      return owner_value_;
    }

    typename Profiler::CoreState& profile()
    {
      return profile_;
    }

    // The fast list of `sc` is empty.  Returns an object of `sc`, leaving the
    // rest of a batch in `fast`; nullptr when memory is exhausted or, with
    // profiling, when a sample point is due in `sc`: alloc_sample_due then
    // serves the allocation.  That case is left to the caller, which holds
    // the request's size and alignment, so that this path keeps neither.
    // The usual case, no message waiting and an awake slab with nothing
    // untouched, no sign of a double free and its count up to date
    // (SlabMeta::list_only), calls nothing: inline in the slow path malloc
    // jumps to, which then saves no registers either (on
    // perf-random-replace, 37 instructions a refill from malloc's jump on,
    // against 66 as alloc_slow's call of this).
    SNMALLOC_FAST_PATH void* alloc_refill(FreeObject*& fast, sizeclass_t sc)
    {
      if (SNMALLOC_UNLIKELY(!usual_refill_counted(sc)))
        return alloc_refill_unusual(fast, sc);
      return alloc_refill_usual(fast, sc);
    }

    // Is the refill of `sc` the usual one?  Tested apart for a caller that
    // leaves the others in a tail call.  When it is, its batch is counted
    // for sampling already: it ends before the next sample point.
    SNMALLOC_FAST_PATH bool usual_refill_counted(sizeclass_t sc)
    {
      const SlabMeta* s = available_[sc].head;
      return !queue.maybe_nonempty() && s != nullptr && s->list_only() &&
        profile_.counted_before_point(sc, s->listed());
    }

    // The usual refill, after usual_refill_counted: the slab's whole list,
    // which is not empty (an available slab has objects to hand out).
    SNMALLOC_FAST_PATH void* alloc_refill_usual(FreeObject*& fast, sizeclass_t sc)
    {
      SlabMeta* s = available_[sc].head;
      Batch b = s->take_list(sleep_plan_[sc]);
      available_[sc].remove_head(s);
      void* p = b.pop();
      fast = b.head;
      return p;
    }

    SNMALLOC_SLOW_PATH void* alloc_refill_unusual(FreeObject*& fast, sizeclass_t sc)
    {
      handle_messages();
      if (profile_.sample_due(*this, sc))
        return nullptr;
      SlabMeta* s = available_[sc].head;
      if (s == nullptr && (s = no_slab_awake(sc)) == nullptr)
        return nullptr;
      Batch b = s->take_all(sleep_plan_[sc]);
      counts_.recount_taken(s);
      return refill_from(fast, sc, s, b);
    }

    // A refill found no awake slab of `sc`: wake the oldest ready dozing
    // ones (mem/slab_state.h), as many as hold a threshold's worth of
    // frees, before the heap grows by a new slab (nullptr if memory is
    // exhausted).  The refills after this one take them as awake slabs,
    // on the usual path (one at a time, perf-peak-growth took 1.6% more
    // instructions).
    SNMALLOC_SLOW_PATH SlabMeta* no_slab_awake(sizeclass_t sc)
    {
      for (uint32_t gathered = 0; gathered < sizeclasses.wake_threshold[sc];)
      {
        SlabMeta* ready = dozing_[sc].take_ready();
        if (ready == nullptr)
          break;
        gathered += ready->frees_while_dozing();
        ready->wake();
        available_[sc].insert(ready);
      }
      if (SlabMeta* woken = available_[sc].head)
        return woken;
      SlabMeta* s = new_slab(sc);
      if (s == nullptr)
        return nullptr;
      dozing_[sc].class_grew();
      sleep_plan_[sc] = SleepPlan::watched();
      growing_wakes_[sc] = GROWING_WAKES;
      available_[sc].insert(s);
      return s;
    }

    // The rest of a refill, given b, what take_all took from s, the first
    // awake slab of `sc` (the head of its list), its count up to date: a
    // slab with untouched objects left stays available.
    SNMALLOC_FAST_PATH void* refill_from(FreeObject*& fast, sizeclass_t sc, SlabMeta* s, Batch b)
    {
      if (s->sleeping())
        available_[sc].remove_head(s);
      if (b.head == nullptr)
        return nullptr;
      b = profile_.split(*this, sc, b);
      if (b.head == nullptr)
        return nullptr; // the sample point is the batch's first object
      void* p = b.pop();
      fast = b.head;
      return p;
    }

    // alloc_refill returned nullptr: serve the sampled allocation if a
    // sample point is due in `sc`; nullptr if memory is exhausted.
    SNMALLOC_SLOW_PATH void*
    alloc_sample_due(FreeObject*& fast, sizeclass_t sc, size_t size, size_t align)
    {
      if (profile_.sample_due(*this, sc))
        return profile_.alloc_at_sample_point(*this, fast, sc, size, align);
      return nullptr;
    }

    // Free an object of one of this allocator's slabs (the checks build:
    // checked and poisoned already, as the objects of messages are).  The
    // default build checks here that p is an object start: an interior
    // pointer on the slab's list would later be handed out over a live
    // object.  One multiply, a rotate and a compare, on the descriptor
    // line the push writes anyway.  It also rejects p at the head of the
    // list: a free, then a free of the same pointer with no free of the
    // slab's in between, caught for a compare.  Both lead to one call, and
    // the stack frame it needs is set up on that branch only (with a
    // report in each, the fast path set one up: 2 instructions a free).
    SNMALLOC_FAST_PATH void dealloc_local(void* p, SlabMeta* meta)
    {
      if constexpr (!config::checks)
      {
        if (SNMALLOC_UNLIKELY(!meta->owner_object_start(p) || p == meta->free))
          local_free_rejected(p, meta);
      }
      if (SNMALLOC_UNLIKELY(meta->push(p, config::checks ? meta->index_of(p) : 0, link_mask(p))))
        slab_needs_attention(meta);
    }

    // The default build's dealloc_local found p not an object start, or
    // at the head of the list.
    [[noreturn]] SNMALLOC_SLOW_PATH static void local_free_rejected(void* p, SlabMeta* meta) noexcept
    {
      report_bad_free(meta->owner_object_start(p) ? BadFree::DoubleFree : BadFree::Interior, p);
    }

    // The checks build's free fast path, of an object of one of this
    // allocator's slabs: checked, pushed, then poisoned (see
    // SlabMeta::check_free), before the slab may be released.  Nothing but
    // tail calls: the fast path saves one register (five before the fill
    // was a tail call).  The slab's base and class are the owner's copies,
    // on the descriptor's line this free writes anyway.
    SNMALLOC_FAST_PATH void dealloc_local_checked(void* p, SlabMeta* meta)
    {
      size_t size = sizeclass_to_size(meta->owner_sizeclass);
      uintptr_t mask = link_mask(p);
      size_t index = SlabMeta::check_free(p, meta->owner_base, meta->owner_sizeclass, mask);
      if (SNMALLOC_UNLIKELY(meta->push(p, index, mask)))
        return poisoned_slab_needs_attention(p, size, meta);
      SlabMeta::poison(p, size);
    }

    SNMALLOC_SLOW_PATH void poisoned_slab_needs_attention(void* p, size_t size, SlabMeta* meta)
    {
      SlabMeta::poison(p, size);
      slab_needs_attention(meta);
    }

    // A local free brought a slab's `needed` to zero: a Watched slab's
    // first free, which makes it doze, a sleeping slab's threshold, which
    // wakes it, or, if every object is back, its release (keeping one per
    // class against thrashing).  Dozing and waking read only the owner's
    // line of the descriptor and no object (mem/slab_meta.h).  A release
    // checks the whole list first, out of line: the others save no
    // registers.  noexcept, as local_free_rejected: with profiling in,
    // clang cannot see that nothing below them throws, and free would
    // call this one rather than jump to it, and keep a handler for both.
    SNMALLOC_SLOW_PATH void slab_needs_attention(SlabMeta* meta) noexcept
    {
      sizeclass_t sc = meta->owner_sizeclass;
      SlabState state = meta->state;
      if (state != SlabState::Asleep) // the usual, in a class that holds steady
      {
        if (state == SlabState::Awake)
          return slab_all_free(meta);
        if (state == SlabState::Dozing)
          dozing_[sc].remove(meta);
        else if (meta->doze())
          return dozing_[sc].push(meta);
      }
      meta->wake();
      available_[sc].insert(meta);
      if (SNMALLOC_UNLIKELY(growing_wakes_[sc] != 0))
        stop_watching_after(sc);
    }

    // A slab of `sc` woke at its threshold while the class's slabs are
    // watched: after GROWING_WAKES of them, they no longer are.
    SNMALLOC_SLOW_PATH void stop_watching_after(sizeclass_t sc)
    {
      if (--growing_wakes_[sc] == 0)
        sleep_plan_[sc] = SleepPlan::until_threshold(sc);
    }

    // Every object of an awake slab is back: kept while no other slab of
    // its class is kept so, or for slabs larger than the smallest, while it
    // is the class's only one available; else released.  (Kept only as the
    // only one, perf-producer-freer released and made again about 4,900
    // slabs a run, now 1,400: the frees come back in messages of
    // thousands, so one slab of a class empties while another is
    // available, and the next refills take that one and then want a new
    // slab.)
    SNMALLOC_SLOW_PATH void slab_all_free(SlabMeta* meta)
    {
      sizeclass_t sc = meta->owner_sizeclass;
      if (sizeclasses.slab_bits[sc] == config::MIN_SLAB_BITS)
      {
        SlabMeta* kept = kept_empty_[sc];
        if (kept == nullptr || kept == meta || !kept->all_free())
        {
          kept_empty_[sc] = meta;
          return;
        }
      }
      else if (available_[sc].only(meta))
        return;
      release_awake_slab(meta);
    }

    // An awake slab with every object back leaves its class's list and the
    // allocator; its free list is read first, as the last chance to find an
    // object freed twice or a link overwritten after a free.
    void release_awake_slab(SlabMeta* meta)
    {
      sizeclass_t sc = meta->owner_sizeclass;
      meta->check_free_list(sizeclasses.capacity[sc] - meta->untouched);
      available_[sc].remove(meta);
      release_slab(meta);
    }

    // An object of one of this allocator's slabs, its slab found through
    // the pagemap; not a fast path, so the pointer is checked.  One that
    // came in a message was ours when it was freed: if its slab is gone,
    // it was freed twice.
    void dealloc_local(void* p)
    {
      dealloc_local_checked_owner(p, pagemap.entry_of(p), owner_value_);
    }

    // A null-terminated list of such objects.
    void dealloc_local_list(FreeObject* f)
    {
      while (f != nullptr)
      {
        FreeObject* next = f->next_object();
        dealloc_local(f);
        f = next;
      }
    }

    // Objects other threads freed for us.  The test is inline, on every
    // refill; the walk is not.
    SNMALLOC_FAST_PATH void handle_messages()
    {
      if (SNMALLOC_UNLIKELY(queue.maybe_nonempty()))
        take_messages();
    }

    // The walk of the inbox, out of line.
    SNMALLOC_SLOW_PATH void take_messages()
    {
      FreeFromInbox free_one{this, owner_value_};
      InboxWalk<FreeFromInbox>(pagemap, free_one).run(queue);
    }

    // p, of `meta`'s slab, owned by `owner`.
    SNMALLOC_FAST_PATH void dealloc_remote(RemoteInbox* owner, const SlabMeta* meta, void* p)
    {
      remote_.add(owner, meta->remote_slot, p, meta->object_size);
    }

    // Post the batches cached for other allocators now.
    void post_remote_frees()
    {
      remote_.flush();
    }

    // Bring the counts of the awake and dozing slabs up to date
    // (mem/heap_counts.h): a class's last slab, kept when all its objects
    // are back, is not recounted on that path, nor is a slab when it
    // dozes.  Its owner's, or an idle allocator's, call.
    void recount_available_slabs()
    {
      for (sizeclass_t sc = 0; sc < NUM_SMALL_CLASSES; sc++)
      {
        for (SlabMeta* s = available_[sc].head; s != nullptr; s = s->next)
          counts_.recount(s);
        dozing_[sc].for_each([&](SlabMeta* s) { counts_.recount(s); });
      }
    }

    // Release the awake slabs with every object back, which slab_all_free
    // keeps for the next refill of their class (malloc_trim).  Its owner's,
    // or an idle allocator's, call.
    void release_empty_slabs()
    {
      for (sizeclass_t sc = 0; sc < NUM_SMALL_CLASSES; sc++)
      {
        SlabMeta* s = available_[sc].head;
        while (s != nullptr)
        {
          SlabMeta* next = s->next;
          if (s->all_free())
            release_awake_slab(s);
          s = next;
        }
      }
    }

    // Large requests: a run of whole chunks.  `zero` asks for zeroed memory.
    SNMALLOC_SLOW_PATH void* alloc_large(size_t size, size_t align, bool zero)
    {
      if (size >= MAX_ALLOC_SIZE || align > (size_t(1) << Arena::BASE_ALIGN_BITS))
        return nullptr;
      if (void* p = profile_.alloc_large(*this, size, align, zero))
        return p;
      return large_run::alloc(size, align, zero, ChunkKind::Large, 0);
    }

    // Give everything cached back: at thread exit, and after a borrowed use.
    void flush(Local& local)
    {
      for (auto& head : local.fast)
      {
        dealloc_local_list(head);
        head = nullptr;
      }
      profile_.flush(*this);
      handle_messages();
      remote_.flush();
    }
  };
} // namespace snmalloc
