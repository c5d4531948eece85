#pragma once
// Layer mem: the out-of-band descriptor of one slab.
//
// A slab's free objects are on its `free` list, or `untouched`: the objects
// at its end never handed out, not linked yet, so their pages are not
// touched before they are needed.  Refill takes the whole list at once, with
// the next step of untouched objects linked in, and puts the slab to sleep
// once none is left untouched; `needed` counts down the frees to its next
// event, as its state says (mem/slab_state.h).
// A double free pushes an object already on the list: the second push closes
// a cycle through the first, and the counter runs ahead of the objects.
// Where that is seen costs the fast paths nothing: a whole-slab release
// reads the list (check_free_list, mem/free_list_check.h), and refill finds
// `needed` wrapped past capacity when a slab already all free was freed
// into again.  A wake walks nothing: counting the list there touched each
// freed object cold (1.65 M of perf-random-replace's 12.2 M first-level
// misses).

#include "../backend/backend.h"
#include "bad_free.h"
#include "free_bits.h"
#include "slab_state.h"

#include <type_traits>

namespace snmalloc
{
  static_assert(NUM_SMALL_CLASSES <= 256, "SlabMeta::owner_sizeclass is a byte");
  static_assert(MAX_CAPACITY < 65536, "SlabMeta's counts of objects are 16 bits");

  struct SlabMeta
  {
    using FreeBits = std::conditional_t<config::checks, OnFreeList, NoFreeBits>;

    // Written by the owner, on every local free.
    FreeObject* free = nullptr;
    uint32_t needed = 0;
    // Objects out as of the slab's last slow-path event (mem/heap_counts.h).
    uint16_t counted_out = 0;
    uint16_t untouched = 0;
    // Copies of `base` and `sizeclass` below, and the class's capacity,
    // wake threshold and object_starts_at constants (ds/sizeclass.h), for
    // the owner: the free fast paths, and a slab's wake and refill (which
    // then read no table).  With these and the bitmap on this line, a
    // local free reads one line of the descriptor (perf,
    // larson: a fifth of the checks free's samples were on the load of the
    // line below), and the default build's object-start check is 5
    // instructions (10 with the class's tables and their address).
    uint16_t owner_capacity = 0;
    uint16_t owner_wake_threshold = 0;
    uint8_t owner_sizeclass = 0;
    SlabState state = SlabState::Awake;
    // The checks build: the slab was cut from zeroed memory, so its free
    // objects are zero past their link and mark (POISON), which calloc
    // then leaves as they are.  Read by the owner's calloc, so on this line.
    bool zeroed = false;
    uintptr_t owner_base = 0;
    uint64_t owner_start_multiplier = 0;
    uint64_t owner_start_bound = 0;
    // The checks build's bitmap, written on every local free: on the
    // owner's line, its first three words (objects of classes of 128 bytes
    // and more), not on the line below, which other threads' frees read
    // (there, the owner's writes took that line from them and back).
    [[no_unique_address]] FreeBits on_free_list;
    SlabMeta* prev = nullptr; // on the owner's available list while awake (not the head's)
    SlabMeta* next = nullptr;
    // Fixed while the slab lives, and read by other threads on every remote
    // free: on a line of its own, so those reads do not miss each time the
    // owner has written the line above (perf: the sizeclass load was a third
    // of the remote free's samples in producer-consumer).
    alignas(64) sizeclass_t sizeclass = 0;
    // The owner's slot in any thread's remote cache (mem/remote_cache.h):
    // read here, a remote free finds its slot with no hash of its own.
    uint32_t remote_slot = 0;
    uintptr_t base = 0;
    // The class's size, which a remote free adds to its cache's bytes.
    size_t object_size = 0;
    // The sizes whose class is this one: those in (size_floor, size_floor
    // + size_span], the next smaller class's size and the step to this
    // one's, so that operator delete(p, size) tests its size in one
    // unsigned compare (holds_size).
    size_t size_floor = 0;
    size_t size_span = 0;
    // The class's object_starts_at constants, for other threads' frees.
    uint64_t start_multiplier = 0;
    uint64_t start_bound = 0;

    // Is `size` one whose class is this slab's?  (False for 0.)
    SNMALLOC_FAST_PATH bool holds_size(size_t size) const
    {
      return size - size_floor - 1 < size_span;
    }

    // Is p, in one of this slab's chunks, one of its object starts?  The
    // owner's check, from the owner's line.
    SNMALLOC_FAST_PATH bool owner_object_start(const void* p) const
    {
      size_t offset = reinterpret_cast<uintptr_t>(p) - owner_base;
      return object_starts_at(offset, owner_start_multiplier, owner_start_bound);
    }

    size_t slab_size() const
    {
      return size_t(1) << sizeclasses.slab_bits[sizeclass];
    }

    // objects_out from the values of its fields: a slab in state `as`
    // with `counted` in `needed`.
    static uint32_t objects_out_of(uint32_t capacity, SlabState as, uint32_t wake_threshold, uint32_t counted)
    {
      if (as == SlabState::Watched)
        return capacity;
      uint32_t out = is_sleeping(as) ? capacity - wake_threshold + counted : counted;
      return out < capacity ? out : capacity;
    }

    // A relaxed load of a field another thread may be writing.
    template<typename T>
    static T read_once(const T& field)
    {
      if constexpr (std::is_enum_v<T>)
        return T(__atomic_load_n(reinterpret_cast<const std::underlying_type_t<T>*>(&field), __ATOMIC_RELAXED));
      else
        return __atomic_load_n(&field, __ATOMIC_RELAXED);
    }

    // Objects not free: neither on the list nor untouched (see the top of
    // this file, and mem/slab_state.h for what `needed` counts in each
    // state).  Owner only.  A counter run past capacity by a double free
    // reads as a full slab.
    uint32_t objects_out() const
    {
      return objects_out_of(owner_capacity, state, owner_wake_threshold, needed);
    }

    // The same, for a reader on another thread (the footprint walk), which
    // races with the owner: each field is read once, so the figure may be
    // stale or mixed but stays within the capacity read.
    uint32_t objects_out_seen() const
    {
      return objects_out_of(read_once(owner_capacity), read_once(state), read_once(owner_wake_threshold), read_once(needed));
    }

    // The class, read once by a reader on another thread: a slab released
    // meanwhile may take another (or none: a value past the classes).
    sizeclass_t sizeclass_seen() const
    {
      return read_once(sizeclass);
    }

    // Is every object free?  Owner only.
    bool all_free() const
    {
      return !sleeping() && needed == 0;
    }

    // Does p, in one of this slab's chunks, point at the start of one of
    // its objects?  Checked on the slow paths that free objects (remote
    // frees, messages), from the fields other threads read (with the
    // class's reciprocal, a slab-size test and a division's multiply, 9
    // instructions more a remote free on perf-producer-freer).
    bool is_object_start(const void* p) const
    {
      size_t offset = reinterpret_cast<uintptr_t>(p) - base;
      return object_starts_at(offset, start_multiplier, start_bound);
    }

    // The free list must hold each of the slab's `expected` touched
    // objects (its first ones; the rest are untouched) once, else
    // report_free_list names the object at fault and stops.  Both are
    // defined in mem/free_list_check.h, included after this class.
    SNMALLOC_SLOW_PATH inline void check_free_list(uint32_t expected) const;
    [[noreturn]] SNMALLOC_SLOW_PATH inline void report_free_list(uint32_t expected) const;

    // The index of the object at p (an object start) in the slab.
    SNMALLOC_FAST_PATH size_t index_of(const void* p) const
    {
      return index_in_slab(reinterpret_cast<uintptr_t>(p) - base, sizeclass);
    }

    // The checks build, on every free by the program, on whichever thread:
    // an object start, not free already (its free mark, see ds/freelist.h,
    // is set from its free until it is handed out again, on the slab's
    // list, in a thread's fast list or in a message); marks it.  Any thread
    // may call this: it reads only fields fixed while the slab lives.
    // Returns the object's index, for the owner's push.  The caller then
    // poisons the object (poison), last: the fill's stores may alias the
    // slab's fields, which would be read again after it, and a fill at
    // the end of the free fast path is a tail call (no registers to save).
    // Inline on the free fast path: as two calls with the object-start
    // check in each, the checks cost 79 instructions a free in perf-larson
    // (callgrind), this and check_not_listed 25.  `base` and `sc` are the
    // slab's: the owner passes its copies (owner_base, owner_sizeclass),
    // other threads the fixed fields.  p is in the slab's chunks (its
    // pagemap entry names the slab): an index past the last object is a
    // pointer into the slack at the slab's end.  `mask` is link_mask(p).
    SNMALLOC_FAST_PATH static size_t
    check_free(void* p, uintptr_t base, sizeclass_t sc, uintptr_t mask)
    {
      SlabPosition at = position_in_slab(reinterpret_cast<uintptr_t>(p) - base, sc);
      if (SNMALLOC_UNLIKELY(!at.at_start || at.index >= sizeclasses.capacity[sc]))
        report_bad_free(BadFree::Interior, p);
      FreeObject* f = FreeObject::from(p);
      if (SNMALLOC_UNLIKELY(f->marked_free(mask)))
        report_bad_free(BadFree::DoubleFree, p);
      f->mark_free(mask);
      return at.index;
    }

    // The checks build, on every push onto the list, of the object start
    // p, object `index` (every caller of push has checked): not on the list
    // already (a mark overwritten by a write after free leaves this exact
    // test).
    SNMALLOC_FAST_PATH void check_not_listed(void* p, size_t index)
    {
      if (SNMALLOC_UNLIKELY(!on_free_list.add(index)))
        report_bad_free(BadFree::DoubleFree, p);
    }

    // Freed objects are zeroed, not filled with a pattern: a read after
    // free sees no stale data either way, and an object handed out again
    // is then zero but for its link and mark, which is all calloc clears
    // (global/api.h).  Nothing reads the fill back: a write after free is
    // found where it overwrites a link or a mark.
    static constexpr int POISON = 0;
    static constexpr size_t POISON_FROM = 2 * sizeof(uintptr_t); // link, mark
    // Objects up to this size are poisoned inline, with at most three
    // 16-byte stores; larger ones through Pal::fill_wide (32-byte stores
    // where the CPU has AVX2, else glibc's memset; not the checked memset,
    // which stops at writes to freed objects, override/checked_copies.h).
    // An inline loop of 16-byte stores took 4% more instructions than
    // glibc's memset on perf-larson (callgrind, up to 512 bytes).
    static constexpr size_t POISON_INLINE_MAX = 64;

    // Poison (zero) the object p of `size` bytes (a sizeclass size: a
    // multiple of 16, as is p) past its link and mark.  Ordinary stores:
    // the program has mostly just read the object's lines, which
    // non-temporal stores would evict (larson kept 0.29-0.73 of the
    // default's speed with them), and those would need an sfence before
    // any store that makes the object another thread's (docs/design.md,
    // the checks build).
    SNMALLOC_FAST_PATH static void poison(void* p, size_t size)
    {
      char* at = static_cast<char*>(p) + POISON_FROM;
      if (size > POISON_INLINE_MAX)
      {
        Pal::fill_wide(at, POISON, size - POISON_FROM);
        return;
      }
      using Bytes16 = unsigned char __attribute__((vector_size(16)));
      const Bytes16 poison_bytes = Bytes16{} + static_cast<unsigned char>(POISON);
      char* end = static_cast<char*>(p) + size;
      if (size >= 32)
      {
        // The first and the last 16 bytes, and what lies between (sizes
        // 32, 48, 64: the stores overlap where fewer than three fit).
        __builtin_memcpy(at, &poison_bytes, sizeof(Bytes16));
        __builtin_memcpy(end - sizeof(Bytes16), &poison_bytes, sizeof(Bytes16));
        if (size == 64)
          __builtin_memcpy(at + sizeof(Bytes16), &poison_bytes, sizeof(Bytes16));
      }
    }

    void init(void* slab_base, sizeclass_t sc)
    {
      base = owner_base = reinterpret_cast<uintptr_t>(slab_base);
      sizeclass = sc;
      owner_sizeclass = static_cast<uint8_t>(sc);
      owner_capacity = static_cast<uint16_t>(sizeclasses.capacity[sc]);
      owner_wake_threshold = static_cast<uint16_t>(sizeclasses.wake_threshold[sc]);
      start_multiplier = owner_start_multiplier = sizeclasses.start_multiplier[sc];
      start_bound = owner_start_bound = sizeclasses.start_bound[sc];
      size_floor = sc == 0 ? 0 : sizeclass_to_size(sc - 1);
      object_size = sizeclass_to_size(sc);
      size_span = object_size - size_floor;
      free = nullptr;
      untouched = sizeclasses.capacity[sc];
      state = SlabState::Awake;
      needed = 0; // all free: no object is out
      on_free_list.set_only(0, untouched);
    }

    // Does take_all take only the list: nothing untouched, and no sign of a
    // double free?  And is the slab counted as all out, which it is then
    // (mem/heap_counts.h), so that the refill need not count it?
    SNMALLOC_FAST_PATH bool list_only() const
    {
      return counted_out_and_untouched() == owner_capacity && needed <= uint32_t(owner_capacity);
    }

    // counted_out, and untouched in the high half: both tested in one
    // compare (2 instructions a refill less).
    SNMALLOC_FAST_PATH uint32_t counted_out_and_untouched() const
    {
      static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__);
      static_assert(offsetof(SlabMeta, untouched) == offsetof(SlabMeta, counted_out) + sizeof(uint16_t));
      uint32_t both;
      __builtin_memcpy(&both, reinterpret_cast<const char*>(this) + offsetof(SlabMeta, counted_out), sizeof(both));
      return both;
    }

    // Take every free object, the next untouched ones linked in first, in
    // address order so the objects handed out together share pages.  The
    // slab sleeps as `plan` says unless some remain untouched.
    Batch take_all(SleepPlan plan)
    {
      uint32_t capacity = uint32_t(owner_capacity);
      // Freed into after all were free: the list shows the double free.
      if (SNMALLOC_UNLIKELY(needed > capacity))
        check_free_list(capacity - untouched);
      if (SNMALLOC_UNLIKELY(untouched != 0))
        return take_all_and_untouched(capacity, plan);
      return take_list(plan);
    }

    // How many objects take_list takes.
    SNMALLOC_FAST_PATH uint32_t listed() const
    {
      return uint32_t(owner_capacity) - needed;
    }

    // take_all when list_only(): the slab sleeps.
    SNMALLOC_FAST_PATH Batch take_list(SleepPlan plan)
    {
      Batch b{free, listed()};
      free = nullptr;
      on_free_list.set_only(owner_capacity, owner_capacity); // none is on the list now
      fall_asleep(plan);
      return b;
    }

    // take_all of a slab with objects never handed out yet.  Untouched
    // objects are linked only to make the batch up to a step (a page's
    // worth at the slab's first refill, a chunk's after: ds/sizeclass.h):
    // the objects freed since the last refill come first.  (Linking
    // a step on every refill touched a new object of the classes over 8 KiB
    // each time, one per 16 KiB step, however many had come back: their
    // slabs, of 256 KiB to 1 MiB, became resident whole, 6 MiB of
    // perf-realloc-growth's peak of 21 MiB.)
    SNMALLOC_SLOW_PATH Batch take_all_and_untouched(uint32_t capacity, SleepPlan plan)
    {
      uint32_t listed = capacity - needed - untouched;
      uint32_t step = untouched == capacity ?
        sizeclasses.first_untouched_step[sizeclass] :
        sizeclasses.untouched_step[sizeclass];
      if (listed < step)
        link_untouched(step - listed);
      Batch b{free, capacity - needed - untouched};
      free = nullptr;
      // The checks build's bits keep counting the objects still untouched
      // as on the list: freeing one is a bad free.  (Linking them all at
      // the first refill instead put the slab to sleep at once, so each
      // object a sample point gave back stayed unused until three more
      // came: 5 MB of 4 KiB objects in func-http-endpoint's heap of 117 MB.)
      on_free_list.set_only(capacity - untouched, capacity);
      if (untouched != 0)
      {
        needed = capacity - untouched; // awake: every touched object is out
        return b;
      }
      fall_asleep(plan);
      return b;
    }

    bool sleeping() const
    {
      return is_sleeping(state);
    }

    // Every object is out (see mem/slab_state.h for the states).
    SNMALLOC_FAST_PATH void fall_asleep(SleepPlan plan)
    {
      state = plan.state;
      needed = plan.needed;
    }

    // The first free of a Watched slab: false if that is its threshold
    // (a class of a few large objects), else it dozes.
    bool doze()
    {
      if (owner_wake_threshold == 1)
        return false;
      state = SlabState::Dozing;
      needed = uint32_t(owner_wake_threshold) - 1;
      return true;
    }

    uint32_t frees_while_dozing() const
    {
      return uint32_t(owner_wake_threshold) - needed;
    }

    // Awake, with the objects freed while it slept (the threshold's, or
    // fewer when a refill takes a Dozing slab early) on its list.  At the
    // threshold `needed` is zero.
    void wake()
    {
      needed = uint32_t(owner_capacity) - owner_wake_threshold + needed;
      state = SlabState::Awake;
    }

    void link_untouched(uint32_t step)
    {
      uint32_t n = step < untouched ? step : untouched;
      uint32_t first = sizeclasses.capacity[sizeclass] - untouched;
      size_t size = sizeclass_to_size(sizeclass);
      for (uint32_t i = first + n; i-- > first;)
      {
        FreeObject* f = FreeObject::from(reinterpret_cast<void*>(base + i * size));
        f->set_next(free);
        if constexpr (config::checks)
          f->mark_free();
        free = f;
      }
      untouched -= n;
    }

    // Return one object; true when the slab needs attention (wake or release).
    // The checks build's bitmap catches a push of an object on the list
    // (the default build's caller, one at the list's head).
    // `p` is an object start of this slab, object `index` (which only the
    // checks build reads): every caller has checked.
    // `mask` is link_mask(p) (0 in the default build).
    SNMALLOC_FAST_PATH bool push(void* p, size_t index, uintptr_t mask)
    {
      FreeObject* f = FreeObject::from(p);
      if constexpr (config::checks)
        check_not_listed(p, index);
      f->set_next(free, mask);
      free = f;
      return --needed == 0;
    }
  };
} // namespace snmalloc

// SlabMeta::check_free_list and report_free_list, which need the whole class.
#include "free_list_check.h"
