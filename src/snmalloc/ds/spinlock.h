#pragma once
// Layer ds: a small test-and-test-and-set lock.  Every lock in the allocator
// guards short critical sections (buddy lists, pool list, a sample list), so
// spinning beats parking; after a while it yields in case the holder was
// descheduled on this 2-core-class hardware.

#include "../pal/pal.h"

#include <atomic>
#include <sched.h>

namespace snmalloc
{
  class SpinLock
  {
    std::atomic<bool> held{false};

  public:
    // Always inline, as the guard below: GCC inlined them in the plain shim
    // but called them in the profiling one (more call sites), 15
    // instructions a call where inline the uncontended case is an exchange
    // and a test (large-object churn sampled at 512 KiB: 4.5 calls a sample).
    SNMALLOC_FAST_PATH void lock() noexcept
    {
      for (unsigned spins = 0; held.exchange(true, std::memory_order_acquire);)
      {
        while (held.load(std::memory_order_relaxed))
        {
          if (++spins < 128)
            Pal::pause();
          else
            ::sched_yield();
        }
      }
    }

    bool try_lock() noexcept
    {
      return !held.load(std::memory_order_relaxed) &&
        !held.exchange(true, std::memory_order_acquire);
    }

    void unlock() noexcept
    {
      held.store(false, std::memory_order_release);
    }

    // Could the lock be taken within `tries` tries, yielding between them?
    // It is not kept.  For a caller that must not wait on a lock its own
    // thread may hold (code a signal handler interrupted).
    bool free_within(unsigned tries) noexcept
    {
      for (unsigned i = 0; i < tries; i++)
      {
        if (try_lock())
        {
          unlock();
          return true;
        }
        ::sched_yield();
      }
      return false;
    }
  };

  class LockGuard
  {
    SpinLock& lock_;

  public:
    SNMALLOC_FAST_PATH explicit LockGuard(SpinLock& l) noexcept : lock_(l)
    {
      lock_.lock();
    }
    SNMALLOC_FAST_PATH ~LockGuard()
    {
      lock_.unlock();
    }
    LockGuard(const LockGuard&) = delete;
    LockGuard& operator=(const LockGuard&) = delete;
  };
} // namespace snmalloc
