#pragma once
// Layer ds: the locks held across fork(), in one pthread_atfork
// registration.
//
// Each part of the library that has locks (the allocator, the profile
// shim's dump control, the HTTP endpoint) sets its slot once.  fork()
// takes them in the slots' order, outermost first: a lock that is held
// while allocating must be taken before the allocator's own.  Separate
// pthread_atfork calls would run in the reverse order of registration,
// that is of which part happened to be set up first: the dump control
// is set up at load, the allocator at the first malloc, so a fork would
// take the allocator's locks and then wait for a dump-control lock whose
// holder waits for an allocator lock (a thread in configure() starting
// the helper thread).

#include "../ds_core/ds_core.h"

#include <atomic>
#include <pthread.h>

namespace snmalloc
{
  // The order in which fork() takes the locks.
  enum class ForkOrder : unsigned
  {
    DumpControl, // override/auto_dump.h: held while starting the helper
    HttpServer, // profile/http_server.h: held while starting its thread
    Allocator, // global/thread_alloc.h: the pool, the profiler, the backend
    Count
  };

  struct ForkLock
  {
    void (*prepare)();
    void (*in_parent)();
    void (*in_child)();
  };

  class ForkLocks
  {
    static constexpr unsigned COUNT = unsigned(ForkOrder::Count);

    std::atomic<const ForkLock*> slot_[COUNT] = {};
    std::atomic<bool> registered_{false};

    // The slots this thread's fork took: one set after prepare may have
    // come too late for it, so the handlers after fork() must not run it.
    static inline thread_local unsigned taken_ = 0;

    static void prepare();
    static void in_parent();
    static void in_child();

  public:
    // Set `lock` as the slot `order` without registering: fork() takes it
    // once some set() has registered.  For a lock that only a second thread
    // could hold across another's fork(): a process gets a second thread
    // from pthread_create, which allocates (the new thread's TLS vector),
    // and the allocator's first allocation registers (global/thread_alloc.h).
    // A process that never allocates then makes no pthread_atfork call
    // (its stub at the far end of the profiling shim's text, libc's code
    // and list: about one page fault net at start-up).
    void set_deferred(ForkOrder order, const ForkLock& lock) noexcept
    {
      slot_[unsigned(order)].store(&lock, std::memory_order_release);
    }

    // Set `lock` (static storage) as the slot `order`, once.  false when
    // pthread_atfork failed (out of memory); the slot is set all the same
    // and a later call retries the registration.
    bool set(ForkOrder order, const ForkLock& lock) noexcept
    {
      slot_[unsigned(order)].store(&lock, std::memory_order_release);
      if (registered_.load(std::memory_order_acquire))
        return true;
      // pthread_atfork is thread-safe; two first calls at once would
      // register twice, so the flag is claimed first.
      if (registered_.exchange(true, std::memory_order_acq_rel))
        return true;
      if (::pthread_atfork(prepare, in_parent, in_child) == 0)
        return true;
      registered_.store(false, std::memory_order_release);
      return false;
    }
  };

  inline ForkLocks fork_locks;

  inline void ForkLocks::prepare()
  {
    unsigned taken = 0;
    for (unsigned i = 0; i < COUNT; i++)
    {
      if (const ForkLock* l = fork_locks.slot_[i].load(std::memory_order_acquire))
      {
        l->prepare();
        taken |= 1u << i;
      }
    }
    taken_ = taken;
  }

  inline void ForkLocks::in_parent()
  {
    for (unsigned i = COUNT; i-- > 0;)
    {
      if (taken_ & (1u << i))
        fork_locks.slot_[i].load(std::memory_order_relaxed)->in_parent();
    }
  }

  // The child's only thread is the one that forked: its copy of taken_.
  inline void ForkLocks::in_child()
  {
    for (unsigned i = COUNT; i-- > 0;)
    {
      if (taken_ & (1u << i))
        fork_locks.slot_[i].load(std::memory_order_relaxed)->in_child();
    }
  }
} // namespace snmalloc
