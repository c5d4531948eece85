#pragma once
// Layer profile/samples, stage "keep": how long the sampled objects of each
// site lived.  At the free of a sampled object its site adds the object's
// weight (what it stands for, as in the heap profile) and its weighted
// lifetime to one cell of a log-scale histogram, kept apart by whether the
// allocating thread or another one freed it.  Objects still alive are not
// here: a dump reads their ages from the live samples.
//
// Per site 2 x 12 cells of two doubles, 384 bytes, in blocks indexed by the
// stack table's site id, reserved from the OS and touched as sites appear.
// A cell is keyed by (site, bucket, freeing thread); a further key (a set
// of labels, say) would make the site index a (site, key) index.

#include "../stacks/stack_table.h"

namespace snmalloc::profile
{
  // Bucket b holds lifetimes below LIFETIME_LIMITS_NS[b] (and at least the
  // limit before); the last has no upper limit.
  inline constexpr size_t LIFETIME_BUCKETS = 12;
  inline constexpr int64_t LIFETIME_LIMITS_NS[LIFETIME_BUCKETS - 1] = {
    1000,
    10000,
    100000,
    1000000,
    10000000,
    100000000,
    1000000000,
    10000000000,
    60000000000,
    600000000000,
    3600000000000};
  inline constexpr const char* LIFETIME_BUCKET_NAMES[LIFETIME_BUCKETS] = {
    "<1us", "<10us", "<100us", "<1ms", "<10ms", "<100ms", "<1s", "<10s",
    "<1min", "<10min", "<1h", ">=1h"};

  inline size_t lifetime_bucket(int64_t ns)
  {
    size_t b = 0;
    while (b < LIFETIME_BUCKETS - 1 && ns >= LIFETIME_LIMITS_NS[b])
      b++;
    return b;
  }

  struct LifetimeCell
  {
    double objects; // weighted: the objects of the program it stands for
    double lifetime_ns; // their summed lifetimes, weighted alike
  };

  struct SiteLifetimes
  {
    // [freed by another thread][bucket]
    LifetimeCell cells[2][LIFETIME_BUCKETS];
  };

  class LifetimeTable
  {
    // 2^12 sites a block (1.5 MiB of address space, touched as used), as
    // many blocks as the stack table may have sites (2^25).
    static constexpr size_t BLOCK_BITS = 12;
    static constexpr size_t BLOCKS = size_t(1) << (25 - BLOCK_BITS);

    // Taken at each sampled free, as the stack table's lock is at each
    // sample.
    SpinLock lock_;
    // Set once each, under the lock; read without it only to prefetch.
    std::atomic<SiteLifetimes*> blocks_[BLOCKS] = {};
    size_t sites_ = 0; // one past the highest site id counted
    std::atomic<size_t> os_bytes_{0};

    // The first site of `block` is counted: its memory, under the lock.
    SNMALLOC_SLOW_PATH SiteLifetimes* new_block(size_t block)
    {
      size_t bytes = sizeof(SiteLifetimes) << BLOCK_BITS;
      auto* b = static_cast<SiteLifetimes*>(profiler_regions.reserve(bytes, "lifetime tables"));
      if (b == nullptr)
        return nullptr;
      blocks_[block].store(b, std::memory_order_relaxed);
      os_bytes_.fetch_add(bytes, std::memory_order_relaxed);
      return b;
    }

  public:
    // A sampled object's end as its site counts it: read from its record
    // before the record goes (see dealloc_sampled).
    struct Freed
    {
      uint32_t site;
      bool by_other_thread;
      int64_t lifetime_ns; // not negative
      double weight;
      size_t bucket; // lifetime_bucket(lifetime_ns)
    };

    // Start loading the cell `f` will be counted in.  A sampled free of a
    // large object finds its site's cell cold (the program wrote a page
    // or more since): on large-object churn its load was three quarters
    // of dealloc_sampled's time (perf), which the free can hide behind
    // giving the object back if the load starts first.
    void prefetch(const Freed& f) const
    {
      size_t block = f.site >> BLOCK_BITS;
      if (block >= BLOCKS)
        return;
      SiteLifetimes* b = blocks_[block].load(std::memory_order_relaxed);
      if (b != nullptr)
        __builtin_prefetch(
          &b[f.site & ((size_t(1) << BLOCK_BITS) - 1)].cells[f.by_other_thread][f.bucket], 1);
    }

    // Count a sampled object's end.  Nothing is counted if memory for the
    // site's block cannot be had.  Inline in the sampled free, which then
    // saves no registers for a call (12 instructions a sampled free).
    SNMALLOC_FAST_PATH void freed(const Freed& f)
    {
      size_t block = f.site >> BLOCK_BITS;
      if (block >= BLOCKS)
        return;
      LockGuard g(lock_);
      SiteLifetimes* b = blocks_[block].load(std::memory_order_relaxed);
      if (SNMALLOC_UNLIKELY(b == nullptr))
      {
        b = new_block(block);
        if (b == nullptr)
          return;
      }
      if (f.site >= sites_)
        sites_ = size_t(f.site) + 1;
      SiteLifetimes& s = b[f.site & ((size_t(1) << BLOCK_BITS) - 1)];
      LifetimeCell& cell = s.cells[f.by_other_thread][f.bucket];
      cell.objects += f.weight;
      cell.lifetime_ns += f.weight * double(f.lifetime_ns);
    }

    // f(site id, its lifetimes) for each site with a block, in id order,
    // under the lock (f must not allocate from the profiler).
    template<typename F>
    void for_each(F&& f)
    {
      LockGuard g(lock_);
      for (size_t id = 0; id < sites_; id++)
      {
        SiteLifetimes* block = blocks_[id >> BLOCK_BITS].load(std::memory_order_relaxed);
        if (block != nullptr)
          f(uint32_t(id), block[id & ((size_t(1) << BLOCK_BITS) - 1)]);
      }
    }

    // Address space taken from the OS (touched as sites are counted).
    size_t os_bytes() const
    {
      return os_bytes_.load(std::memory_order_relaxed);
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

  inline LifetimeTable lifetime_table;
} // namespace snmalloc::profile
