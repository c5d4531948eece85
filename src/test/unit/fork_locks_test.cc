// The registry of locks held across fork() (ds/fork_locks.h) where forks
// and registrations meet: a fork while another thread adds a lock before
// any registration, two forks in flight at once, and a fork in the middle
// of the registration.  Nothing here registers before a trial does: this
// executable does not include snmalloc.h (whose load-time setup
// registers) and its malloc is the C library's.  A registration is once
// per process, so each trial is a fresh one.
#include "support/child_wait.h"
#include "support/death.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <pthread.h>
#include <snmalloc/ds/fork_locks.h>
#include <thread>
#include <unistd.h>

// glibc's pthread_atfork, as its libc_nonshared.a defines it, with a pause
// after the registration when a trial asks: the moment between the
// handlers' registration and the end of pthread_once, made long enough
// for a fork from another thread to fall in it.
extern "C" int __register_atfork(void (*)(void), void (*)(void), void (*)(void), void*);
extern "C" void* __dso_handle;
namespace
{
  std::atomic<bool> slow_registration{false};
}
extern "C" int pthread_atfork(void (*prepare)(void), void (*parent)(void), void (*child)(void))
{
  int result = __register_atfork(prepare, parent, child, &__dso_handle);
  if (slow_registration.load())
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  return result;
}

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

namespace
{
  // Two forks at once, their times set by the prepare of lock L: the first
  // holds L 150 ms before its fork, the second, which waits for L, 300 ms.
  // A lock X is added between them, after the second fork looked at the
  // slots (so it does not take X).  The adder must wait for the second
  // fork too, not only the first: were it to take X as the first ended,
  // the second fork's child would find X held.
  pthread_mutex_t l_mutex = PTHREAD_MUTEX_INITIALIZER;
  std::atomic<int> l_prepares{0};
  std::atomic<int> x_prepares{0};
  std::atomic<bool> x_held{false};

  void l_prepare()
  {
    ::pthread_mutex_lock(&l_mutex);
    int n = l_prepares.fetch_add(1);
    std::this_thread::sleep_for(std::chrono::milliseconds(n == 0 ? 150 : 300));
  }

  void l_release()
  {
    ::pthread_mutex_unlock(&l_mutex);
  }

  void x_prepare()
  {
    x_prepares++;
  }

  constexpr snmalloc::ForkLock lock_l{10, l_prepare, l_release, l_release};
  constexpr snmalloc::ForkLock lock_x{20, x_prepare, nothing, nothing};

  // A fork from another thread; the child exits with `child_status()`.
  template<typename F>
  std::thread fork_after(int delay_ms, pid_t& child, F child_status)
  {
    return std::thread([delay_ms, &child, child_status] {
      std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
      child = ::fork();
      if (child == 0)
        ::_exit(child_status());
    });
  }
}

TEST_CASE("two forks in flight (trial)", "[.trial]")
{
  snmalloc::fork_locks.add(lock_l);
  pid_t first = -1, second = -1;
  std::thread fork_first = fork_after(0, first, [] { return 0; });
  // Its child fails if X is held there and the fork did not take it.
  std::thread fork_second =
    fork_after(50, second, [] { return x_held.load() && x_prepares.load() == 0 ? 1 : 0; });
  std::thread adder([] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    snmalloc::fork_locks.add_deferred(lock_x);
    x_held = true;
  });
  fork_first.join();
  fork_second.join();
  adder.join();
  bool clean = true;
  for (pid_t child : {first, second})
    clean &= child > 0 && snmalloc_test::exited_cleanly(snmalloc_test::wait_with_limit(child, CHILD_LIMIT));
  ::_exit(clean ? snmalloc_test::RAN_CLEAN : 1);
}

TEST_CASE("a lock added while two forks are in flight is not taken until both are done")
{
  CHECK(snmalloc_test::reexec_ran_clean("two forks in flight (trial)", [] { ::alarm(60); }));
}

// ThreadSanitizer's own pthread_once does not restart in a forked child,
// which then waits for the setup forever: glibc's behaviour, which the
// registry relies on, is tested without it.
#if !defined(__SANITIZE_THREAD__)
namespace
{
  // A fork in the middle of the registration: glibc restarts the
  // pthread_once in the child, whose handlers the fork already ran; a
  // second registration would run them twice at the child's forks, and
  // take every lock twice.
  std::atomic<int> counted_prepares{0};

  void counted_prepare()
  {
    counted_prepares++;
  }

  constexpr snmalloc::ForkLock lock_first{30, nothing, nothing, nothing};
  constexpr snmalloc::ForkLock lock_counted{40, counted_prepare, nothing, nothing};

  int child_registers_and_forks()
  {
    snmalloc::fork_locks.add(lock_counted);
    counted_prepares = 0;
    pid_t grandchild = ::fork();
    if (grandchild == 0)
      ::_exit(0);
    int status = grandchild < 0 ? -2 : snmalloc_test::wait_with_limit(grandchild, CHILD_LIMIT);
    return counted_prepares.load() == 1 && snmalloc_test::exited_cleanly(status) ? 0 : 1;
  }
}

TEST_CASE("registration cut short (trial)", "[.trial]")
{
  slow_registration = true;
  std::thread registering([] { snmalloc::fork_locks.add(lock_first); });
  pid_t child = -1;
  std::thread forking = fork_after(100, child, child_registers_and_forks);
  forking.join();
  registering.join();
  bool clean = child > 0 && snmalloc_test::exited_cleanly(snmalloc_test::wait_with_limit(child, CHILD_LIMIT));
  ::_exit(clean ? snmalloc_test::RAN_CLEAN : 1);
}

TEST_CASE("a child forked in the middle of the registration takes each lock once at its own forks")
{
  CHECK(snmalloc_test::reexec_ran_clean("registration cut short (trial)", [] { ::alarm(60); }));
}
#endif
