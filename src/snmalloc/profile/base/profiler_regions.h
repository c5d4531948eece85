#pragma once
// Layer profile/base: the profiler's own mappings outside the arena (the
// stack table, its hash indexes, the lifetime tables, the event ring, the
// peak copy, the guarded slots' descriptors), each reserved through here
// with what it is for, so that the footprint profile can name their
// resident pages instead of leaving them among the process's anonymous
// memory.  None is ever unmapped, so the list only grows; a few dozen
// entries in a long run (the tables double as they grow).

#include "../../pal/pal.h"

#include <atomic>

namespace snmalloc::profile
{
  struct ProfilerRegion
  {
    uintptr_t base;
    size_t bytes;
    const char* what; // a string literal
  };

  class ProfilerRegions
  {
    static constexpr size_t MAX_REGIONS = 256;
    ProfilerRegion regions_[MAX_REGIONS] = {};
    // Entries below `published_` are complete; `claimed_` hands out slots.
    std::atomic<size_t> claimed_{0};
    std::atomic<size_t> published_{0};

  public:
    // Reserve `bytes` of lazily committed memory for `what`.  Past the
    // list's capacity the memory is still reserved, only not named.
    void* reserve(size_t bytes, const char* what) noexcept
    {
      void* p = Pal::reserve_lazy_rw(bytes);
      if (p == nullptr)
        return nullptr;
      size_t slot = claimed_.fetch_add(1, std::memory_order_relaxed);
      if (slot >= MAX_REGIONS)
        return p;
      regions_[slot] = {reinterpret_cast<uintptr_t>(p), bytes, what};
      // Publish in slot order, so a reader never sees a half-written entry.
      size_t expected = slot;
      while (!published_.compare_exchange_weak(
        expected, slot + 1, std::memory_order_release, std::memory_order_relaxed))
        expected = slot;
      return p;
    }

    template<typename Visit>
    void for_each(Visit&& visit) const
    {
      size_t n = published_.load(std::memory_order_acquire);
      for (size_t i = 0; i < n; i++)
        visit(regions_[i]);
    }
  };

  inline ProfilerRegions profiler_regions;
} // namespace snmalloc::profile
