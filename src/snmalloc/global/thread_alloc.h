#pragma once
// Layer global: each thread's allocator: attach on the first slow path,
// detach at thread exit, borrow after that, and fork handling.

#include "config_profiler.h"
#include "pool.h"

#include <pthread.h>

#if defined(__GLIBC__)
// glibc's lock of its list of stdio streams (exported, declared by no
// header since 2.28).
extern "C" void _IO_list_lock();
extern "C" void _IO_list_unlock();
extern "C" void _IO_list_resetlock();
#endif

namespace snmalloc
{
  inline AllocPool<Alloc> alloc_pool;

  // Constant-initialised, detached until the thread's first slow path; see
  // mem/local_cache.h.
  inline thread_local Local local_cache;

  namespace detail
  {
    inline pthread_key_t teardown_key;
    inline pthread_once_t process_setup_once = PTHREAD_ONCE_INIT;
    // Set on the thread running the setup: an allocation inside it (libc's
    // calls may allocate, and in the shims that is this allocator)
    // attaches without waiting for it.
    inline thread_local bool in_process_setup = false;

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
      Profiler::postfork_child();
      alloc_pool.postfork();
    }

    // Innermost: every other part of the library may allocate while it
    // holds its own lock, so fork() takes those first (ds/fork_locks.h).
    inline constexpr ForkLock allocator_fork_lock{
      ForkLock::INNERMOST, prefork, postfork, postfork_child};

    // Outermost: glibc's list of stdio streams, which fork() locks itself
    // after the handlers (and before its own malloc's locks).  A thread
    // holding a stream's lock may allocate (getline grows its line) while
    // one holding the list's lock waits for that stream (fflush(NULL)), so
    // a fork that held the allocator's locks and then waited for the list
    // hung (a getline thread against a fflush(NULL) thread: 13 forks of 13
    // in the plain shim).  The lock is recursive: fork() takes it again on
    // the same thread, and resets it in the child, as this does.
    inline void add_libc_fork_locks() noexcept
    {
#if defined(__GLIBC__)
      static constexpr ForkLock stdio_list{0, _IO_list_lock, _IO_list_unlock, _IO_list_resetlock};
      fork_locks.add(stdio_list);
#endif
    }

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

    inline void run_process_setup() noexcept
    {
      if (::pthread_key_create(&teardown_key, teardown) != 0)
        report_fatal("pthread_key_create failed");
      add_libc_fork_locks();
      fork_locks.add(allocator_fork_lock);
    }

    // Once per process, before the thread that runs it takes any of the
    // allocator's locks: until the fork handlers are registered, a fork()
    // by another thread leaves the child every lock held at that moment,
    // held for good (decay_stress's child hung on the backend's lock in 4
    // of 143 runs: its parent forked while the workers made their first
    // allocations).  pthread_once restarts a setup that a fork cut short
    // in the child, where a flag set by a thread the child lacks would
    // never clear.
    inline void process_setup() noexcept
    {
      if (in_process_setup)
        return;
      in_process_setup = true;
      ::pthread_once(&process_setup_once, run_process_setup);
      in_process_setup = false;
    }
  } // namespace detail

  // Give this thread an allocator; false when memory is exhausted (the
  // thread stays detached and the call that needed it fails).  The order
  // matters: the setup comes first (above), and pthread_setspecific may
  // allocate, which must find `core` set.
  SNMALLOC_SLOW_PATH inline bool attach_thread(Local& local) noexcept
  {
    detail::process_setup();
    if (local.core != nullptr) // an allocation inside the setup attached it
      return true;
    Alloc* core = alloc_pool.acquire();
    if (core == nullptr)
      return false;
    local.attach(core);
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
