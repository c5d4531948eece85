#pragma once
// Layer ds: the locks held across fork(), in one pthread_atfork
// registration.
//
// Each part of the library that has locks adds one ForkLock, with an
// `order` that the part chooses itself: fork() takes the locks in
// ascending order and releases them in descending order.  A lock whose
// holder may wait for another registered lock (typically: it allocates
// while holding it) needs a lower order than that lock; locks that nobody
// waits under are innermost.  Separate pthread_atfork calls would instead
// run in the reverse order of registration, that is of which part
// happened to be set up first, and a fork could take an inner lock and
// then wait for an outer one whose holder waits for the inner.

#include "spinlock.h"

#include <atomic>
#include <pthread.h>

namespace snmalloc
{
  struct ForkLock
  {
    // The order of locks that no other registered lock's holder takes
    // while holding its own: the allocator's, which every other part may
    // allocate under.  Outer locks choose a lower order.
    static constexpr unsigned INNERMOST = ~0u;

    unsigned order;
    void (*prepare)();
    void (*in_parent)();
    void (*in_child)();
  };

  class ForkLocks
  {
    static constexpr unsigned SLOTS = 8;

    std::atomic<const ForkLock*> slot_[SLOTS] = {};
    std::atomic<bool> registered_{false};
    SpinLock adding_;

    // The locks this thread's fork took, in the order taken: one added
    // after prepare may have come too late for it, so the handlers after
    // fork() must not run it.
    static inline thread_local const ForkLock* taken_[SLOTS];
    static inline thread_local unsigned taken_count_ = 0;

    static void prepare();
    static void in_parent();
    static void in_child();

  public:
    // Add `lock` (static storage, once; adding it again changes nothing)
    // without registering: fork() takes it once some add() has registered.
    // For a lock that only a second thread could hold across another's
    // fork(): a process gets a second thread from pthread_create, which
    // allocates (the new thread's TLS vector), and the shims' first
    // allocation registers (global/thread_alloc.h).  A process that never
    // allocates then makes no pthread_atfork call (its stub at the far end
    // of the profiling shim's text, libc's code and list: about one page
    // fault net at start-up).
    void add_deferred(const ForkLock& lock) noexcept
    {
      LockGuard g(adding_);
      std::atomic<const ForkLock*>* free_slot = nullptr;
      for (auto& slot : slot_)
      {
        const ForkLock* l = slot.load(std::memory_order_relaxed);
        if (l == &lock)
          return;
        if (l == nullptr && free_slot == nullptr)
          free_slot = &slot;
      }
      if (free_slot == nullptr)
        report_fatal("fork_locks: more than 8 fork locks");
      free_slot->store(&lock, std::memory_order_release);
    }

    // Add `lock` and register the handlers.  false when pthread_atfork
    // failed (out of memory); the lock is added all the same and a later
    // call retries the registration.
    bool add(const ForkLock& lock) noexcept
    {
      add_deferred(lock);
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

  // adding_ is held across fork() too, so a child never finds it held by
  // a thread it does not have.
  inline void ForkLocks::prepare()
  {
    fork_locks.adding_.lock();
    // The locks in ascending order (insertion sort: few).
    unsigned count = 0;
    for (auto& slot : fork_locks.slot_)
    {
      const ForkLock* l = slot.load(std::memory_order_acquire);
      if (l == nullptr)
        continue;
      unsigned at = count++;
      for (; at > 0 && taken_[at - 1]->order > l->order; at--)
        taken_[at] = taken_[at - 1];
      taken_[at] = l;
    }
    for (unsigned k = 0; k < count; k++)
      taken_[k]->prepare();
    taken_count_ = count;
  }

  inline void ForkLocks::in_parent()
  {
    for (unsigned k = taken_count_; k-- > 0;)
      taken_[k]->in_parent();
    fork_locks.adding_.unlock();
  }

  // The child's only thread is the one that forked: its copy of taken_.
  inline void ForkLocks::in_child()
  {
    for (unsigned k = taken_count_; k-- > 0;)
      taken_[k]->in_child();
    fork_locks.adding_.unlock();
  }
} // namespace snmalloc
