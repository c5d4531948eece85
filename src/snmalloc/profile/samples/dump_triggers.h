#pragma once
// Layer profile/samples: the thresholds of automatic dumps (dump_every=,
// dump_on_growth=), noticed where a sample is taken.
//
// A sample is the profiler's slow path, taken once per R allocated bytes on
// average: there the unbiased estimates of the bytes allocated so far and
// of the live heap move, and crossing a threshold costs one write of a byte
// to a pipe, which wakes the helper thread that dumps (override/auto_dump.h).
// Nothing is dumped on the allocating thread, and the malloc and free paths
// are untouched.  The estimates move in steps of about R bytes, so a
// threshold is seen within a few R of where the heap really crosses it.

#include "peak_profile.h"

#include <unistd.h>

namespace snmalloc::profile
{
  class DumpTriggers
  {
    // The pipe's write end; -1: no helper thread, nothing to wake.
    std::atomic<int> wake_fd_{-1};
    std::atomic<int64_t> every_{0};
    std::atomic<int64_t> next_every_{0};
    std::atomic<int64_t> growth_{0};
    std::atomic<int64_t> next_growth_{0};
    std::atomic<int64_t> allocated_{0};

    // Move `next` past `now` by `step`; true for the one thread that did.
    static bool advance(std::atomic<int64_t>& next, int64_t now, int64_t step)
    {
      int64_t seen = next.load(std::memory_order_relaxed);
      while (now >= seen)
      {
        if (next.compare_exchange_weak(seen, now + step, std::memory_order_relaxed))
          return true;
      }
      return false;
    }

    void wake() const
    {
      int fd = wake_fd_.load(std::memory_order_relaxed);
      if (fd < 0)
        return;
      int saved = errno;
      char byte = WAKE_BYTE;
      (void)!::write(fd, &byte, 1);
      errno = saved;
    }

  public:
    // What the helper reads from the pipe for a threshold dump.
    static constexpr char WAKE_BYTE = 2;

    // A dump each `every` more bytes allocated, and each time the live
    // heap passes its previous high by `growth` (0: off).  The high starts
    // at the heap as it is now.
    void configure(int wake_fd, int64_t every, int64_t growth)
    {
      every_.store(every, std::memory_order_relaxed);
      next_every_.store(allocated_.load(std::memory_order_relaxed) + every);
      growth_.store(growth, std::memory_order_relaxed);
      // (Off, the peak's page is not touched: a fault at start-up.)
      next_growth_.store(growth != 0 ? peak_profile.live_bytes() + growth : 0);
      wake_fd_.store(wake_fd, std::memory_order_release);
    }

    // fork(): the child's pipe leads to the parent's helper.
    void forget_helper()
    {
      wake_fd_.store(-1, std::memory_order_relaxed);
    }

    // A sample standing for `bytes` allocated bytes was taken.  With no
    // threshold set, nothing is counted: the count is a line every sampling
    // thread writes, and `configure` measures `every` from wherever it stands.
    void sampled(int64_t bytes)
    {
      int64_t every = every_.load(std::memory_order_relaxed);
      int64_t growth = growth_.load(std::memory_order_relaxed);
      if (every == 0 && growth == 0)
        return;
      int64_t allocated = allocated_.fetch_add(bytes, std::memory_order_relaxed) + bytes;
      bool due = every != 0 && advance(next_every_, allocated, every);
      if (growth != 0 && advance(next_growth_, peak_profile.live_bytes(), growth))
        due = true;
      if (SNMALLOC_UNLIKELY(due))
        wake();
    }
  };

  inline DumpTriggers dump_triggers;
} // namespace snmalloc::profile
