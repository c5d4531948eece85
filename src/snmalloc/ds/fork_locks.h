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
//
// pthread_atfork runs prepare handlers in the reverse order of their
// registration and the others in order, so handlers registered before
// these run while the fork holds every lock here.  The shims register
// these before any other (override/atfork_first.h); in a program that uses
// the allocator as a library, handlers registered before its first
// allocation run inside.  If they allocate, they go through the locks on
// the forking thread (SpinLock, this_thread_holds_fork_locks) rather than
// wait for them forever; if they take a lock of their own that a thread
// holds while it waits for one of these, the fork waits for good.

#include "../pal/pal.h"
#include "spinlock.h"

#include <atomic>
#include <pthread.h>
#include <sched.h>

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

    // Filled from the front, never emptied.  No lock guards them: a lock
    // held by the adder at a fork before any registration would be the
    // child's for good (no handler runs to release it), and the child's
    // first add() would wait for it forever.
    std::atomic<const ForkLock*> slot_[SLOTS] = {};
    // Forks between their prepare and the fork itself: a count, as glibc
    // (2.36 here) runs two forks' handlers at once.
    std::atomic<unsigned> forks_in_flight_{0};
    pthread_once_t register_once_ = PTHREAD_ONCE_INIT;
    // Set by the registration, and by prepare, which runs only once the
    // handlers are registered: a child inherits it.
    std::atomic<bool> registered_{false};

    // The locks this thread's fork took, in the order taken: one added
    // after prepare looked may have come too late for it, so the handlers
    // after fork() must not run it.
    static inline thread_local const ForkLock* taken_[SLOTS];
    static inline thread_local unsigned taken_count_ = 0;
    // Set while this thread registers the handlers: pthread_atfork may
    // allocate, or come back through the shims' __register_atfork, and the
    // registration under way must not be waited for on its own thread.
    static inline thread_local bool registering_ = false;

    static void prepare();
    static void in_parent();
    static void in_child();
    static void register_handlers();

  public:
    // Add `lock` (static storage; adding it again changes nothing) without
    // registering: fork() takes it once some add() has registered.  For a
    // lock that only a second thread could hold across another's fork(): a
    // process gets a second thread from pthread_create, which allocates
    // (the new thread's TLS vector), and the shims' first allocation
    // registers (global/thread_alloc.h).  A process that never allocates
    // then makes no pthread_atfork call (its stub at the far end of the
    // profiling shim's text, libc's code and list: about one page fault
    // net at start-up).
    //
    // When it returns, no fork is in flight that might not take `lock`: a
    // fork whose prepare looked at the slots before `lock` came (added here
    // or by another thread a moment ago) does not take it, so the caller
    // must not take it until that fork is over.  The caller therefore
    // holds no lock that a fork takes, or it could wait for a fork that
    // waits for it.
    void add_deferred(const ForkLock& lock) noexcept
    {
      for (auto& slot : slot_)
      {
        const ForkLock* l = slot.load(std::memory_order_acquire);
        // A lost race fills the slot: it holds `lock`, or the next one is
        // tried.  Slots are never emptied, so `lock` is in none before.
        while (l == nullptr && !slot.compare_exchange_weak(l, &lock, std::memory_order_seq_cst))
        {
        }
        if (l == nullptr || l == &lock)
        {
          // prepare counts itself in before it looks at the slots, this
          // looks at the count after the slot (both seq_cst): a fork that
          // missed `lock` is seen here.
          while (forks_in_flight_.load(std::memory_order_seq_cst) != 0)
            ::sched_yield();
          return;
        }
      }
      report_fatal("fork_locks: more than 8 fork locks");
    }

    // Register the handlers, then add `lock`.  false when pthread_atfork
    // failed (out of memory; not retried): the lock is added all the same.
    // The registration runs under pthread_once, which glibc restarts in a
    // child whose parent forked in the middle of it (a flag claimed by a
    // thread the child lacks would leave it unregistered for good); if that
    // fork already ran the handlers, the child has them and does not
    // register again, which would take every lock twice at its forks.
    bool add(const ForkLock& lock) noexcept
    {
      register_once();
      add_deferred(lock);
      return registered_.load(std::memory_order_acquire);
    }

    // Register the handlers if nobody has: the locks added later need no
    // registration of their own.  On the thread that is registering them
    // (an allocation inside pthread_atfork), returns at once.
    void register_once() noexcept
    {
      if (!registering_)
        ::pthread_once(&register_once_, register_handlers);
    }
  };

  inline ForkLocks fork_locks;

  inline void ForkLocks::register_handlers()
  {
    if (fork_locks.registered_.load(std::memory_order_acquire))
      return;
    registering_ = true;
    fork_locks.registered_.store(
      ::pthread_atfork(prepare, in_parent, in_child) == 0, std::memory_order_release);
    registering_ = false;
  }

  inline void ForkLocks::prepare()
  {
    fork_locks.registered_.store(true, std::memory_order_relaxed);
    fork_locks.forks_in_flight_.fetch_add(1, std::memory_order_seq_cst);
    // The locks in ascending order (insertion sort: few).
    unsigned count = 0;
    for (auto& slot : fork_locks.slot_)
    {
      const ForkLock* l = slot.load(std::memory_order_seq_cst);
      if (l == nullptr)
        break;
      unsigned at = count++;
      for (; at > 0 && taken_[at - 1]->order > l->order; at--)
        taken_[at] = taken_[at - 1];
      taken_[at] = l;
    }
    for (unsigned k = 0; k < count; k++)
      taken_[k]->prepare();
    taken_count_ = count;
    this_thread_holds_fork_locks = true;
  }

  // The fork is done: an adder may take its lock now, while these are
  // released.
  inline void ForkLocks::in_parent()
  {
    this_thread_holds_fork_locks = false;
    fork_locks.forks_in_flight_.fetch_sub(1, std::memory_order_release);
    for (unsigned k = taken_count_; k-- > 0;)
      taken_[k]->in_parent();
  }

  // The child's only thread is the one that forked: its copy of taken_.
  // The parent's other forks in flight are not the child's.
  inline void ForkLocks::in_child()
  {
    this_thread_holds_fork_locks = false;
    fork_locks.forks_in_flight_.store(0, std::memory_order_release);
    for (unsigned k = taken_count_; k-- > 0;)
      taken_[k]->in_child();
  }
} // namespace snmalloc
