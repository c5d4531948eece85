// The registry of locks held across fork() (ds/fork_locks.h) before any
// pthread_atfork registration: a fork while another thread adds a lock
// must leave the child a registry that it can add to and register from.
// Nothing here registers before a trial does: this executable does not
// include snmalloc.h (whose load-time setup registers) and its malloc is
// the C library's.  A registration is once per process, so each trial is
// a fresh one.
#include "support/child_wait.h"
#include "support/death.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <snmalloc/ds/fork_locks.h>
#include <thread>
#include <unistd.h>

namespace
{
  constexpr int TRIALS = 40;
  constexpr int FORKS_PER_TRIAL = 50;
  // A child adds a lock, registers and forks once: one still running after
  // this long waits for something a thread of its parent held.
  constexpr auto CHILD_LIMIT = std::chrono::seconds(10);

  void nothing() {}

  template<unsigned N>
  constexpr snmalloc::ForkLock lock_number{100 + N, nothing, nothing, nothing};

  std::atomic<bool> stop{false};

  // The child: add a lock of its own, register, and fork once more, so that
  // the handlers run on what the parent's fork left.
  [[noreturn]] void child_adds_and_forks()
  {
    bool registered = snmalloc::fork_locks.add(lock_number<7>);
    pid_t grandchild = ::fork();
    if (grandchild == 0)
      ::_exit(0);
    int status = grandchild < 0 ? -2 : snmalloc_test::wait_with_limit(grandchild, CHILD_LIMIT);
    ::_exit(registered && snmalloc_test::exited_cleanly(status) ? 0 : 1);
  }
}

TEST_CASE("fork while adding (trial)", "[.trial]")
{
  // One thread adds six new locks, then the first again and again (each
  // call once went through a lock of the registry's own), while this one
  // forks.
  std::thread adder([] {
    snmalloc::fork_locks.add_deferred(lock_number<1>);
    snmalloc::fork_locks.add_deferred(lock_number<2>);
    snmalloc::fork_locks.add_deferred(lock_number<3>);
    snmalloc::fork_locks.add_deferred(lock_number<4>);
    snmalloc::fork_locks.add_deferred(lock_number<5>);
    snmalloc::fork_locks.add_deferred(lock_number<6>);
    while (!stop.load(std::memory_order_relaxed))
      snmalloc::fork_locks.add_deferred(lock_number<1>);
  });
  int failed = 0;
  for (int i = 0; i < FORKS_PER_TRIAL && failed == 0; i++)
  {
    pid_t child = ::fork();
    if (child == 0)
      child_adds_and_forks();
    int status = child < 0 ? -2 : snmalloc_test::wait_with_limit(child, CHILD_LIMIT);
    if (!snmalloc_test::exited_cleanly(status))
    {
      std::fprintf(stderr, "fork %d: child %s (status %d)\n", i, status == -1 ? "hung" : "failed", status);
      failed++;
    }
  }
  stop.store(true, std::memory_order_relaxed);
  adder.join();
  ::_exit(failed == 0 ? snmalloc_test::RAN_CLEAN : 1);
}

TEST_CASE("a fork while another thread adds a fork lock, before any registration, leaves the child able to add and register")
{
  int failed_trials = 0;
  for (int t = 0; t < TRIALS && failed_trials == 0; t++)
  {
    if (!snmalloc_test::reexec_ran_clean("fork while adding (trial)", [] { ::alarm(60); }))
      failed_trials++;
  }
  CHECK(failed_trials == 0);
}
