#pragma once
// Layer global: each thread's allocator: attach on the first slow path,
// detach at thread exit, borrow after that, and fork handling.

#include "config_profiler.h"
#include "pool.h"

#include <pthread.h>

namespace snmalloc
{
  inline AllocPool<Alloc> alloc_pool;

  // Constant-initialised, detached until the thread's first slow path; see
  // mem/local_cache.h.
  inline thread_local Local local_cache;

  namespace detail
  {
    inline pthread_key_t teardown_key;
    inline std::atomic<int> process_setup_state{0}; // 0 none, 1 running, 2 done

    inline void prefork() noexcept
    {
      alloc_pool.prefork();
      Profiler::prefork();
      backend.prefork();
    }

    inline void postfork() noexcept
    {
      backend.postfork();
      Profiler::postfork();
      alloc_pool.postfork();
    }

    inline void postfork_child() noexcept
    {
      backend.postfork_child();
      Profiler::postfork();
      alloc_pool.postfork();
    }

    // Innermost: every other part of the library may allocate while it
    // holds its own lock, so fork() takes those first (ds/fork_locks.h).
    inline constexpr ForkLock allocator_fork_lock{
      ForkLock::INNERMOST, prefork, postfork, postfork_child};

    // Runs from pthread's key destructors at thread exit (not for the
    // thread that calls exit(): its allocator simply stays attached).
    inline void teardown(void*) noexcept
    {
      Local& local = local_cache;
      if (Alloc* core = local.core)
      {
        core->flush(local);
        local.detach();
        alloc_pool.release(core);
      }
      local.torn_down = true;
    }

    // Once per process, after the first thread is attached, so that the
    // calls below may themselves allocate.
    inline void process_setup() noexcept
    {
      int expected = 0;
      if (!process_setup_state.compare_exchange_strong(expected, 1))
      {
        // Another thread is doing it; it does not allocate from here on.
        while (process_setup_state.load(std::memory_order_acquire) != 2)
          Pal::pause();
        return;
      }
      if (::pthread_key_create(&teardown_key, teardown) != 0)
        report_fatal("pthread_key_create failed");
      fork_locks.add(allocator_fork_lock);
      process_setup_state.store(2, std::memory_order_release);
    }
  } // namespace detail

  // Give this thread an allocator; false when memory is exhausted (the
  // thread stays detached and the call that needed it fails).  The order
  // matters: the pool and pthread_setspecific may allocate, which must find
  // `core` set.
  SNMALLOC_SLOW_PATH inline bool attach_thread(Local& local) noexcept
  {
    Alloc* core = alloc_pool.acquire();
    if (core == nullptr)
      return false;
    local.attach(core);
    detail::process_setup();
    ::pthread_setspecific(detail::teardown_key, &local);
    return true;
  }

  // After teardown (in later TLS destructors): use a pooled allocator for one
  // operation and give it straight back.  `f` returns a pointer; nullptr when
  // no allocator can be had.
  template<typename F>
  SNMALLOC_SLOW_PATH void* with_borrowed_alloc(F&& f) noexcept
  {
    Local borrowed{};
    Alloc* core = alloc_pool.acquire();
    if (core == nullptr)
      return nullptr;
    borrowed.attach(core);
    void* result = f(*core, borrowed);
    core->flush(borrowed);
    alloc_pool.release(core);
    return result;
  }
} // namespace snmalloc
