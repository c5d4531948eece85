// fork() from a multi-threaded process while the other threads allocate
// hard: the child must be able to allocate and free at once (the
// allocator's locks are consistent across fork), including blocks that
// belonged to threads which do not exist in the child.
#include "support/alloc_checks.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <snmalloc/snmalloc.h>
#include <string>
#include <random>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace snmalloc_test;

namespace
{
  constexpr size_t busy_threads = 4;
  constexpr size_t forks = 6;
  constexpr size_t shared_slots = 64;
  constexpr unsigned child_time_limit_seconds = 30;

  // Busy threads swap blocks in and out of these slots, so at fork time
  // the slots hold blocks of several threads' allocators.
  std::atomic<void*> slots[shared_slots];

  void allocate_hard(size_t index, const std::atomic<bool>& stop)
  {
    std::mt19937_64 rng(index);
    std::vector<void*> mine(256, nullptr);
    while (!stop.load(std::memory_order_relaxed))
    {
      size_t size = rng() % 64 == 0 ? 65537 + rng() % (1 << 20) : 1 + rng() % 4096;
      void* p = std::malloc(size);
      if (p == nullptr)
        continue;
      std::memset(p, 0x3c, size);
      void*& own = mine[rng() % mine.size()];
      std::free(own);
      own = p;
      if (rng() % 4 == 0)
      {
        void* q = std::malloc(64);
        std::free(slots[rng() % shared_slots].exchange(q));
      }
    }
    for (void* p : mine)
      std::free(p);
  }

  // The child's work; returns the number of problems found, reported
  // through the exit status.
  int child_work(const std::vector<std::pair<void*, size_t>>& parents_blocks)
  {
    int problems = 0;
    for (const auto& [p, size] : parents_blocks)
    {
      problems += !stamp_intact(p, size, size);
      std::free(p);
    }
    for (auto& slot : slots)
      std::free(slot.exchange(nullptr));

    std::vector<std::pair<void*, size_t>> blocks;
    for (size_t size = 1; size <= (size_t(8) << 20); size = size * 3 / 2 + 1)
    {
      void* p = std::malloc(size);
      if (p == nullptr)
        return problems + 1;
      stamp(p, size, size);
      blocks.emplace_back(p, size);
      void* zeroed = std::calloc(1, size);
      problems += zeroed == nullptr || !all_zero(zeroed, size);
      std::free(zeroed);
    }
    for (const auto& [p, size] : blocks)
    {
      problems += !stamp_intact(p, size, size);
      std::free(p);
    }

    // A new thread in the child allocates and frees too.
    std::thread child_thread([&] {
      for (size_t size = 16; size <= (size_t(1) << 20); size *= 2)
      {
        void* p = std::malloc(size);
        problems += p == nullptr;
        std::free(p);
      }
    });
    child_thread.join();
    return problems;
  }
}

TEST_CASE("fork-while-threads-allocate")
{
  std::atomic<bool> stop{false};
  std::vector<std::thread> busy;
  for (size_t i = 0; i < busy_threads; i++)
    busy.emplace_back(allocate_hard, i, std::cref(stop));

  for (size_t round = 0; round < forks; round++)
  {
    INFO("fork round " << round);
    // Blocks of the forking thread, for the child to check and free.
    std::vector<std::pair<void*, size_t>> parents_blocks;
    for (size_t size : {size_t(24), size_t(3000), size_t(200000)})
    {
      void* p = std::malloc(size);
      REQUIRE(p != nullptr);
      stamp(p, size, size);
      parents_blocks.emplace_back(p, size);
    }
    // Let the busy threads get going again after the previous round.
    std::this_thread::sleep_for(std::chrono::milliseconds(50));

    pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0)
    {
      // A deadlock in the child turns into SIGALRM, which the parent sees.
      alarm(child_time_limit_seconds);
      int problems = child_work(parents_blocks);
      _exit(problems == 0 ? 0 : 1);
    }
    int status = 0;
    REQUIRE(waitpid(child, &status, 0) == child);
    INFO("child status " << status);
    CHECK(WIFEXITED(status));
    if (WIFEXITED(status))
      CHECK(WEXITSTATUS(status) == 0);
    else if (WIFSIGNALED(status))
      FAIL_CHECK("child killed by signal " << WTERMSIG(status));

    for (const auto& [p, size] : parents_blocks)
    {
      CHECK(stamp_intact(p, size, size));
      std::free(p);
    }
  }
  stop = true;
  for (auto& thread : busy)
    thread.join();
  for (auto& slot : slots)
    std::free(slot.exchange(nullptr));
}

namespace
{
  // A lock of a layer above the allocator, held while allocating as the
  // dump control and the HTTP endpoint hold theirs, with the HTTP
  // endpoint's order (just outside the allocator's).  It is added after
  // the allocator's: fork() must still take it first.  Its prepare reads
  // the statistics, which take the backend's lock: if the allocator's
  // locks were held already, this thread would wait for itself.
  std::mutex outer_mutex;
  char outer_events[8];
  size_t outer_event_count = 0;

  void outer_log(char event)
  {
    if (outer_event_count < sizeof(outer_events) - 1)
      outer_events[outer_event_count++] = event;
  }

  void outer_prepare()
  {
    outer_mutex.lock();
    outer_log('P');
    if (snmalloc::stats().resident_bytes != 0)
      outer_log('s');
  }

  void outer_in_parent()
  {
    outer_log('p');
    outer_mutex.unlock();
  }

  void outer_in_child()
  {
    outer_log('c');
    outer_mutex.unlock();
  }

  constexpr snmalloc::ForkLock outer_lock{
    snmalloc::ForkLock::INNERMOST - 1, outer_prepare, outer_in_parent, outer_in_child};
}

TEST_CASE("fork-takes-outer-locks-before-the-allocators")
{
  void* held = std::malloc(100); // the allocator's lock is added by now
  REQUIRE(held != nullptr);
  REQUIRE(snmalloc::fork_locks.add(outer_lock));
  // In the wrong order the fork never returns: SIGALRM ends the test.
  alarm(child_time_limit_seconds);
  outer_event_count = 0;
  pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0)
  {
    outer_events[outer_event_count] = 0;
    _exit(std::strcmp(outer_events, "Psc") == 0 ? 0 : 1);
  }
  alarm(0);
  outer_events[outer_event_count] = 0;
  CHECK(std::string(outer_events) == "Psp");
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  std::free(held);
}

namespace
{
  // A lock added without registering (as the dump control's is at load):
  // fork() takes it through the registration another lock made, here the
  // allocator's at this program's first allocation.
  int deferred_prepares = 0;
  int deferred_children = 0;

  void deferred_prepare()
  {
    deferred_prepares++;
  }

  void deferred_in_parent() {}

  void deferred_in_child()
  {
    deferred_children++;
  }

  constexpr snmalloc::ForkLock deferred_lock{
    snmalloc::ForkLock::INNERMOST - 1, deferred_prepare, deferred_in_parent, deferred_in_child};
}

TEST_CASE("fork-takes-a-deferred-slot-once-another-registered")
{
  void* held = std::malloc(100); // the allocator's lock registers by now
  REQUIRE(held != nullptr);
  snmalloc::fork_locks.add_deferred(deferred_lock);
  alarm(child_time_limit_seconds);
  pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0)
    _exit(deferred_prepares == 1 && deferred_children == 1 ? 0 : 1);
  alarm(0);
  CHECK(deferred_prepares == 1);
  CHECK(deferred_children == 0);
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  std::free(held);
}

namespace
{
  // Locks of three orders, added neither in their order nor once: fork()
  // takes each once, lowest order first, and releases them in reverse.
  std::string order_events;

  template<char Name>
  struct OrderedLock
  {
    static void prepare()
    {
      order_events += Name;
    }
    static void after()
    {
      order_events += char(Name - 'a' + 'A');
    }
  };

  constexpr snmalloc::ForkLock lock_a{
    100, OrderedLock<'a'>::prepare, OrderedLock<'a'>::after, OrderedLock<'a'>::after};
  constexpr snmalloc::ForkLock lock_b{
    200, OrderedLock<'b'>::prepare, OrderedLock<'b'>::after, OrderedLock<'b'>::after};
  constexpr snmalloc::ForkLock lock_c{
    300, OrderedLock<'c'>::prepare, OrderedLock<'c'>::after, OrderedLock<'c'>::after};
}

TEST_CASE("fork-takes-locks-by-their-order-each-once")
{
  void* held = std::malloc(100);
  REQUIRE(held != nullptr);
  order_events.reserve(64); // no allocation inside the fork handlers
  REQUIRE(snmalloc::fork_locks.add(lock_c));
  REQUIRE(snmalloc::fork_locks.add(lock_a));
  snmalloc::fork_locks.add_deferred(lock_b);
  REQUIRE(snmalloc::fork_locks.add(lock_c));
  REQUIRE(snmalloc::fork_locks.add(lock_a));
  order_events.clear();
  alarm(child_time_limit_seconds);
  pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0)
    _exit(order_events == "abcCBA" ? 0 : 1);
  alarm(0);
  CHECK(order_events == "abcCBA");
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  std::free(held);
}
