#pragma once
// Layer profile/stacks, stage "record": the stack table.  Each distinct stack is
// stored once, and each distinct (stack, object size), a site, is a small
// fixed-size entry that names its stack and accumulates the unbiased count
// and bytes of every allocation sampled there (the profile's alloc_objects
// / alloc_space).  Sample records carry the site's id, so a live sample
// costs tens of bytes however deep its stack.
//
// Stacks and sites are separate so that a sample at a known call site with
// a new object size finds its stack warm and adds one 64-byte site at the
// end of the site array, not a whole entry with its frames.  Sites are not
// keyed by the requested size: on a workload of varied sizes nearly every
// sample asks for a size never seen before, so keyed by it the table would
// grow by a site a sample without bound (measured: 2.5 MiB of peak RSS on
// xthread-mix, a run of about a second) and each sample's lookup would
// miss in a growing index.  A site keeps the one size all its allocations
// requested, or 0 (unknown) once two differed; a live object's own
// requested size is in its record.
//
// A site is also keyed by the allocation labels in force at the sample
// (core/label_sets.h): a sample's record carries its labels in its site id,
// and the cumulative counts of a site split by them.
//
// Entries are immortal, so ids and frame pointers stay valid for the life of
// the process (the raw sample stream hands them out).  The table's memory
// comes straight from the OS, never from malloc.

#include "hash_index.h"
#include "stack_capture.h"

#include <cstring>

namespace snmalloc::profile
{
  struct StackEntry
  {
    uint64_t hash;
    uint32_t depth;
    uintptr_t frames[1]; // `depth` of them
  };

  struct SiteEntry
  {
    const StackEntry* stack;
    uint64_t object_size;
    // What every allocation sampled here asked for; 0 once two differed.
    uint64_t requested_size;
    double alloc_objects;
    double alloc_bytes;
    // The weight of a sample here (sample_weight) at `weighed`, the rate
    // of the site's last sample: an object size's weight in bytes mode
    // is an expm1 and a division (60 instructions a sample), computed
    // again only when the rate changed.
    double weight;
    size_t weighed_interval;
    uint32_t labels; // the label set's id (label_sets.h)
    SampleMode weighed_mode;
  };

  class StackTable;

  // The entry in `table` of the stack a thread last recorded: samples from
  // one place in a row (large-object churn: nearly all from one call site)
  // then neither hash their frames nor compare them with memcmp (65 of a
  // sample's instructions there), only with the entry's frames, a load and
  // a compare a frame.  Entries are never freed, so it stays valid.
  struct LastStack
  {
    const StackTable* table = nullptr;
    const StackEntry* entry = nullptr;

    bool holds(const StackTable* t, const uintptr_t* f, size_t d) const
    {
      if (t != table || d != entry->depth)
        return false;
      for (size_t i = 0; i < d; i++)
      {
        if (f[i] != entry->frames[i])
          return false;
      }
      return true;
    }

    void keep(const StackTable* t, const StackEntry* e)
    {
      table = t;
      entry = e;
    }
  };

  inline thread_local LastStack last_stack;

  class StackTable
  {
    // Blocks are reserved whole at the first sample and touched as they
    // fill: small enough that the first reservation is under 1 MiB.
    static constexpr size_t STACK_BLOCK = size_t(1) << 18;
    // Sites by id: blocks of a power of two of them, found in a fixed table
    // (2^13 sites of 64 bytes a block, 2^25 sites at most).
    static constexpr size_t SITE_BLOCK_BITS = 13;
    static constexpr size_t SITE_BLOCKS = 4096;

    SpinLock lock_;
    HashIndex stacks_; // words: StackEntry pointers
    HashIndex sites_; // words: site id + 1
    char* stack_cursor_ = nullptr;
    char* stack_end_ = nullptr;
    SiteEntry* site_blocks_[SITE_BLOCKS] = {};
    std::atomic<size_t> os_bytes_{0};

    void* os_alloc(size_t bytes)
    {
      void* p = profiler_regions.reserve(bytes, "stack table");
      if (p != nullptr)
        os_bytes_.fetch_add(bytes, std::memory_order_relaxed);
      return p;
    }

    static uint64_t mix(uint64_t h)
    {
      h ^= h >> 33;
      h *= 0xff51afd7ed558ccdULL;
      h ^= h >> 33;
      return h;
    }

    static uint64_t stack_hash(const uintptr_t* frames, size_t depth)
    {
      uint64_t h = 0x9E3779B97F4A7C15ULL ^ depth;
      for (size_t i = 0; i < depth; i++)
      {
        h ^= frames[i];
        h *= 0xff51afd7ed558ccdULL;
        h ^= h >> 32;
      }
      return mix(h);
    }

    // From the stack's hash, not its entry, so that the site's line can be
    // loaded before the stack is found.
    static uint64_t site_hash(uint64_t stack_hash, size_t size, uint32_t labels)
    {
      return mix(stack_hash * 0xc4ceb9fe1a85ec53ULL ^ size ^ uint64_t(labels) << 40);
    }

    SiteEntry& site(size_t id)
    {
      return site_blocks_[id >> SITE_BLOCK_BITS][id & ((size_t(1) << SITE_BLOCK_BITS) - 1)];
    }

    StackEntry* new_stack(const uintptr_t* frames, size_t depth, uint64_t hash)
    {
      size_t bytes = bits::align_up(
        sizeof(StackEntry) + (depth ? depth - 1 : 0) * sizeof(uintptr_t), 16);
      if (stack_cursor_ == nullptr || stack_cursor_ + bytes > stack_end_)
      {
        stack_cursor_ = static_cast<char*>(os_alloc(STACK_BLOCK));
        if (stack_cursor_ == nullptr)
          return nullptr;
        stack_end_ = stack_cursor_ + STACK_BLOCK;
      }
      auto* e = reinterpret_cast<StackEntry*>(stack_cursor_);
      stack_cursor_ += bytes;
      std::memcpy(e->frames, frames, depth * sizeof(uintptr_t));
      e->depth = uint32_t(depth);
      e->hash = hash;
      return e;
    }

    // The new site's id + 1, 0 when out of memory.
    uintptr_t new_site(
      const StackEntry* stack, size_t object_size, size_t requested_size, uint32_t labels)
    {
      size_t id = sites_.count();
      size_t block = id >> SITE_BLOCK_BITS;
      if (block >= SITE_BLOCKS)
        return 0;
      if (site_blocks_[block] == nullptr)
      {
        site_blocks_[block] = static_cast<SiteEntry*>(
          os_alloc(sizeof(SiteEntry) << SITE_BLOCK_BITS));
        if (site_blocks_[block] == nullptr)
          return 0;
      }
      site(id) = SiteEntry{stack, object_size, requested_size, 0, 0, 0, 0, labels, SampleMode::Bytes};
      return id + 1;
    }

    // Under the lock: the site of a stack (`is_stack` tells it, `stack`
    // finds or adds it for a new site) for objects of `object_size` under
    // `labels`, as its id + 1, added if there is none; 0 when out of
    // memory.  A site asked for with other requested sizes keeps none.
    template<typename IsStack, typename Stack>
    uintptr_t find_or_add_site(
      uint64_t hash, size_t object_size, size_t requested_size, uint32_t labels, IsStack is_stack, Stack stack)
    {
      uintptr_t word = sites_.find_or_add(
        hash,
        [&](uintptr_t w) {
          const SiteEntry& s = site(w - 1);
          return s.object_size == object_size && s.labels == labels && is_stack(s.stack);
        },
        [&]() -> uintptr_t {
          const StackEntry* e = stack();
          return e == nullptr ? 0 : new_site(e, object_size, requested_size, labels);
        },
        os_bytes_);
      if (word != 0)
      {
        SiteEntry& s = site(word - 1);
        if (s.requested_size != requested_size)
          s.requested_size = 0;
      }
      return word;
    }

    static bool same_stack(const StackEntry* e, uint64_t hash, const uintptr_t* frames, size_t depth)
    {
      return e->hash == hash && e->depth == depth &&
        std::memcmp(e->frames, frames, depth * sizeof(uintptr_t)) == 0;
    }

    const StackEntry* find_or_add_stack(const uintptr_t* frames, size_t depth, uint64_t hash)
    {
      return reinterpret_cast<const StackEntry*>(stacks_.find_or_add(
        hash,
        [&](uintptr_t word) {
          return same_stack(reinterpret_cast<const StackEntry*>(word), hash, frames, depth);
        },
        [&] { return reinterpret_cast<uintptr_t>(new_stack(frames, depth, hash)); },
        os_bytes_));
    }

  public:
    static constexpr uint32_t NO_ID = 0xffffffff;

    // A site's hashes: of its stack, and of the site (stack, object size,
    // labels); and the stack's entry if this thread's last sample had the
    // same stack (LastStack), else nullptr.
    struct SiteKey
    {
      uint64_t stack_hash;
      uint64_t hash;
      const StackEntry* stack;
    };

    // The key of the site of `frames` for objects of `object_size` under
    // `labels`, and the loads its record() will wait for started: the
    // table's lock and the site's index slot.  The sample's other work
    // done between the two then hides them; cold (after a large object's
    // pages were written) they were four fifths of record()'s time (perf).
    SiteKey key(const uintptr_t* frames, size_t depth, size_t object_size, uint32_t labels)
    {
      const LastStack& last = last_stack;
      const StackEntry* known = last.holds(this, frames, depth) ? last.entry : nullptr;
      uint64_t sh = known != nullptr ? known->hash : stack_hash(frames, depth);
      uint64_t h = site_hash(sh, object_size, labels);
      __builtin_prefetch(&lock_, 1);
      sites_.prefetch(h);
      return {sh, h, known};
    }

    // A sample's site id (NO_ID when out of memory) and weight.
    struct Recorded
    {
      uint32_t id;
      double weight;
    };

    // Find or add the site of `key` (from key() with the same arguments)
    // and count one allocation sampled at `rate` on it: of the object, or,
    // for an object realloc grew in place by `grown_by` bytes, of those
    // bytes, the only ones allocated (a point fell among them, so they are
    // weighed by their own probability of holding one).
    Recorded record(
      SiteKey key,
      const uintptr_t* frames,
      size_t depth,
      size_t object_size,
      size_t requested_size,
      SampleRate rate,
      uint32_t labels = 0,
      size_t grown_by = 0)
    {
      uint64_t sh = key.stack_hash;
      uint64_t h = key.hash;
      LockGuard g(lock_);
      // A known site is found by its own index alone, its stack compared
      // through it; the stacks' index is searched only for a new site.
      uintptr_t word = find_or_add_site(
        h,
        object_size,
        requested_size,
        labels,
        [&](const StackEntry* stack) {
          // A stack is one entry: the known one's matches only itself.
          return key.stack != nullptr ? stack == key.stack : same_stack(stack, sh, frames, depth);
        },
        [&] { return find_or_add_stack(frames, depth, sh); });
      if (word == 0)
        return {NO_ID, 0};
      SiteEntry& s = site(word - 1);
      if (s.stack != key.stack)
        last_stack.keep(this, s.stack);
      if (s.weighed_interval != rate.interval || s.weighed_mode != rate.mode)
      {
        s.weight = sample_weight(rate.mode, object_size, rate.interval);
        s.weighed_interval = rate.interval;
        s.weighed_mode = rate.mode;
      }
      if (SNMALLOC_LIKELY(grown_by == 0))
      {
        s.alloc_objects += s.weight;
        s.alloc_bytes += s.weight * double(object_size);
      }
      else
      {
        double w = sample_weight(rate.mode, grown_by, rate.interval);
        s.alloc_objects += w;
        s.alloc_bytes += w * double(grown_by);
      }
      return {uint32_t(word - 1), s.weight};
    }

    // The site of site `id`'s stack and labels for objects of `object_size`,
    // added, with nothing counted, if there is none: where a sampled object
    // realloc grew in place without a new sample is held, so that its
    // `bytes` label says its size.  `id` itself when memory runs out.
    uint32_t resized(uint32_t id, size_t object_size, size_t requested_size)
    {
      LockGuard g(lock_);
      const StackEntry* stack = site(id).stack;
      uint32_t labels = site(id).labels;
      uintptr_t word = find_or_add_site(
        site_hash(stack->hash, object_size, labels),
        object_size,
        requested_size,
        labels,
        [&](const StackEntry* other) { return other == stack; },
        [&] { return stack; });
      return word == 0 ? id : uint32_t(word - 1);
    }

    // Address space taken from the OS (touched as entries fill it).
    size_t os_bytes() const
    {
      return os_bytes_.load(std::memory_order_relaxed);
    }

    // The stack of a site.
    const StackEntry* stack_of(uint32_t id)
    {
      LockGuard g(lock_);
      return id < sites_.count() ? site(id).stack : nullptr;
    }

    // Each site as it is now (its counts cumulative), in id order, under
    // the lock; the stack a site points to is immortal.
    template<typename F>
    void for_each(F&& f)
    {
      LockGuard g(lock_);
      for (size_t i = 0; i < sites_.count(); i++)
        f(site(i));
    }

    void prefork() noexcept
    {
      lock_.hold_for_fork();
    }

    void postfork() noexcept
    {
      lock_.release_after_fork();
    }
  };

  inline StackTable stack_table;
} // namespace snmalloc::profile
