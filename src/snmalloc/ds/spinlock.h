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
  // Set on the thread whose fork() holds every lock registered with
  // ds/fork_locks.h, from when its prepare handler has taken them all until
  // its handlers after fork() release them.  pthread_atfork handlers
  // registered before the allocator's (in a program that uses it as a
  // library: a library's constructor) run inside that span, after the
  // allocator's prepare and before its parent and child handlers, and may
  // allocate: on this thread such an allocation goes through the locks its
  // fork holds.  Every other thread waits for them, so nobody else is
  // inside what they guard.
  inline thread_local bool this_thread_holds_fork_locks = false;

  class SpinLock
  {
    static constexpr uint8_t FREE = 0, HELD = 1, HELD_BY_FORK = 2;
    std::atomic<uint8_t> state_{FREE};

    SNMALLOC_SLOW_PATH void lock_contended() noexcept
    {
      for (unsigned spins = 0;;)
      {
        uint8_t s = state_.load(std::memory_order_relaxed);
        if (s == FREE && state_.compare_exchange_weak(s, HELD, std::memory_order_acquire))
          return;
        if (s == HELD_BY_FORK && this_thread_holds_fork_locks)
          return; // a handler around this thread's fork(): see above
        if (++spins < 128)
          Pal::pause();
        else
          ::sched_yield();
      }
    }

  public:
    // Always inline, as the guard below: GCC inlined them in the plain shim
    // but called them in the profiling one (more call sites), 15
    // instructions a call where inline the uncontended case is a
    // compare-exchange and a test (large-object churn sampled at 512 KiB:
    // 4.5 calls a sample).  A compare-exchange, not an exchange, so that a
    // lock held by a fork is not overwritten by a thread that then waits.
    SNMALLOC_FAST_PATH void lock() noexcept
    {
      uint8_t expected = FREE;
      if (SNMALLOC_UNLIKELY(!state_.compare_exchange_strong(expected, HELD, std::memory_order_acquire)))
        lock_contended();
    }

    bool try_lock() noexcept
    {
      uint8_t expected = FREE;
      return state_.load(std::memory_order_relaxed) == FREE &&
        state_.compare_exchange_strong(expected, HELD, std::memory_order_acquire);
    }

    // A lock that its fork holds stays held when a handler around that
    // fork, which went through it, is done with it.
    SNMALLOC_FAST_PATH void unlock() noexcept
    {
      if (SNMALLOC_LIKELY(state_.load(std::memory_order_relaxed) != HELD_BY_FORK))
        state_.store(FREE, std::memory_order_release);
    }

    // fork()'s prepare handler: take the lock for the fork.
    void hold_for_fork() noexcept
    {
      lock();
      pass_to_fork();
    }

    // The same, for a prepare handler that holds the lock already.
    void pass_to_fork() noexcept
    {
      state_.store(HELD_BY_FORK, std::memory_order_relaxed);
    }

    // The handlers after fork(), in the parent and in the child.
    void release_after_fork() noexcept
    {
      state_.store(FREE, std::memory_order_release);
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
