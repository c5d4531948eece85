// Allocation outside the ordinary life of main and threads: before main
// (static initialisers, constructor functions), after it (atexit handlers,
// static destructors, destructor functions), in thread_local destructors
// and in a pthread key destructor that re-arms itself so it runs after
// every other thread-exit destructor, including the allocator's own.
//
// What runs after main cannot use Catch2; it reports a failure on stderr
// and exits with status 1, which ctest sees.
#include "support/alloc_checks.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <limits.h>
#include <mutex>
#include <pthread.h>
#include <string>
#include <thread>
#include <vector>

using namespace snmalloc_test;

namespace
{
  // Allocates, stamps, checks and frees a spread of sizes (small to 1 MiB)
  // through malloc, calloc, realloc and new; true if all behaved.
  bool exercise_allocator()
  {
    bool ok = true;
    for (size_t size = 1; size <= (size_t(1) << 20); size = size * 2 + 3)
    {
      void* p = std::malloc(size);
      if (p == nullptr)
        return false;
      stamp(p, size, size);
      void* zeroed = std::calloc(1, size);
      ok &= zeroed != nullptr && all_zero(zeroed, size);
      std::free(zeroed);
      void* grown = std::realloc(p, 2 * size);
      if (grown == nullptr)
        return false;
      ok &= stamp_intact(grown, size, size);
      std::free(grown);
      auto* object = new std::string(size % 100, 'x');
      ok &= object->size() == size % 100;
      delete object;
    }
    return ok;
  }

  [[noreturn]] void fail_after_main(const char* where)
  {
    static const char prefix[] = "lifetime test failed: ";
    ssize_t ignored = write(2, prefix, sizeof(prefix) - 1);
    ignored = write(2, where, std::strlen(where));
    ignored = write(2, "\n", 1);
    (void)ignored;
    _exit(1);
  }

  // A block kept across phases of the program's life.
  struct Stamped
  {
    void* p = nullptr;
    size_t size = 0;

    void allocate(size_t n)
    {
      size = n;
      p = std::malloc(n);
      if (p != nullptr)
        stamp(p, size, size);
    }

    bool intact() const
    {
      return p != nullptr && stamp_intact(p, size, size);
    }

    void release()
    {
      std::free(p);
      p = nullptr;
    }
  };

  // --- Static destruction (set up before main) ----------------------------

  // Blocks allocated during main, by main and by an exited thread, that
  // static destruction frees.
  Stamped freed_at_exit_from_main, freed_at_exit_from_thread;

  // Destroyed after main returns. Its one instance is created by the first
  // constructor function before that allocates, so it is registered for
  // destruction before any static the allocator creates on first use, and
  // destroyed after all of them.
  struct StaticDestructor
  {
    ~StaticDestructor()
    {
      if (!exercise_allocator())
        fail_after_main("allocation in a static destructor");
      for (const Stamped* kept :
           {&freed_at_exit_from_main, &freed_at_exit_from_thread})
      {
        // Unset if the test that allocates them was not selected.
        if (kept->p != nullptr && !kept->intact())
          fail_after_main("block kept for static destruction was damaged");
      }
      freed_at_exit_from_main.release();
      freed_at_exit_from_thread.release();
    }
  };

  // --- Before main -------------------------------------------------------

  struct
  {
    bool identity_ok = false;
    bool exercised_ok = false;
    Stamped small, large;
  } constructor_function_results;

  // Runs before ordinary static initialisers (priority 101 is the first
  // available to programs).
  __attribute__((constructor(101))) void allocate_in_constructor_function()
  {
    static StaticDestructor destroyed_after_everything;
    auto& r = constructor_function_results;
    r.identity_ok = std::string(snmalloc_identity()) == "snmalloc";
    r.exercised_ok = exercise_allocator();
    r.small.allocate(40);
    r.large.allocate(300000);
  }

  struct StaticInitialiser
  {
    bool exercised_ok;
    Stamped block;
    std::vector<int> numbers;

    StaticInitialiser() : exercised_ok(exercise_allocator())
    {
      block.allocate(5000);
      for (int i = 0; i < 10000; i++)
        numbers.push_back(i);
    }
  } static_initialiser;

  // --- Other code after main ---------------------------------------------

  void allocate_in_atexit_handler()
  {
    if (!exercise_allocator())
      fail_after_main("allocation in an atexit handler");
  }

  // Destructor functions with the lowest priority number run last of all.
  __attribute__((destructor(101))) void allocate_in_destructor_function()
  {
    if (!exercise_allocator())
      fail_after_main("allocation in a destructor function");
  }

  // --- Thread exit -------------------------------------------------------

  // Counts how thread-exit code fared; checked by the test after join.
  struct ThreadExitResults
  {
    std::atomic<int> thread_local_ok{0};
    std::atomic<int> thread_local_failed{0};
    std::atomic<int> key_rounds{0};
    std::atomic<int> key_failed{0};
    std::mutex lock;
    std::vector<Stamped> handed_to_main;
  } thread_exit_results;

  // A thread_local whose destructor allocates, and frees a block the
  // thread allocated while alive.
  struct AllocatesWhenDestroyed
  {
    Stamped own;
    bool report_to_results = true;

    ~AllocatesWhenDestroyed()
    {
      bool ok = exercise_allocator() && (own.p == nullptr || own.intact());
      own.release();
      if (!report_to_results)
      {
        // The main thread's instance is destroyed at exit.
        if (!ok)
          fail_after_main("allocation in the main thread's thread_local destructor");
        return;
      }
      (ok ? thread_exit_results.thread_local_ok :
            thread_exit_results.thread_local_failed)++;
    }
  };

  // Constructed before the thread first allocates (so destroyed after
  // the allocator's thread-exit work, if that uses a thread_local) and
  // after (destroyed before it).
  thread_local AllocatesWhenDestroyed destroyed_last;
  thread_local AllocatesWhenDestroyed destroyed_first;

  pthread_key_t rearming_key;

  // The value of rearming_key: a block and the destructor round it is for.
  struct KeyValue
  {
    Stamped block;
    int round;
  };

  // Runs at thread exit, then sets its value again so glibc calls it in
  // the next round, up to the last: the later rounds come after all other
  // key destructors.
  void rearming_key_destructor(void* value)
  {
    auto* previous = static_cast<KeyValue*>(value);
    thread_exit_results.key_rounds++;
    bool ok = exercise_allocator() && previous->block.intact();
    previous->block.release();
    auto* next = new KeyValue{{}, previous->round + 1};
    delete previous;
    next->block.allocate(100 + static_cast<size_t>(next->round));
    ok &= next->block.intact();
    if (!ok)
      thread_exit_results.key_failed++;
    if (next->round <= PTHREAD_DESTRUCTOR_ITERATIONS)
    {
      pthread_setspecific(rearming_key, next);
      return;
    }
    // The last round's block outlives the thread; main frees it.
    std::lock_guard<std::mutex> guard(thread_exit_results.lock);
    thread_exit_results.handed_to_main.push_back(next->block);
    delete next;
  }
}

TEST_CASE("allocation-before-main")
{
  auto& r = constructor_function_results;
  CHECK(r.identity_ok);
  CHECK(r.exercised_ok);
  CHECK(r.small.intact());
  CHECK(r.large.intact());
  r.small.release();
  r.large.release();

  CHECK(static_initialiser.exercised_ok);
  CHECK(static_initialiser.block.intact());
  static_initialiser.block.release();
  CHECK(static_initialiser.numbers.size() == 10000);
  CHECK(static_initialiser.numbers.back() == 9999);
}

TEST_CASE("allocation-after-main-is-set-up")
{
  // Arms the checks that run after main: an atexit handler, the main
  // thread's thread_local, and blocks for the static destructor to free.
  REQUIRE(std::atexit(allocate_in_atexit_handler) == 0);
  destroyed_last.report_to_results = false;
  destroyed_last.own.allocate(777);
  freed_at_exit_from_main.allocate(12345);
  std::thread([] { freed_at_exit_from_thread.allocate(70000); }).join();
  REQUIRE(freed_at_exit_from_main.intact());
  REQUIRE(freed_at_exit_from_thread.intact());
}

TEST_CASE("allocation-in-thread-exit-destructors")
{
  constexpr int threads = 16;
  REQUIRE(pthread_key_create(&rearming_key, rearming_key_destructor) == 0);
  for (int i = 0; i < threads; i++)
  {
    std::thread([i] {
      destroyed_last.own.allocate(10 + static_cast<size_t>(i));
      exercise_allocator();
      destroyed_first.own.allocate(60000);
      auto* first = new KeyValue{{}, 1};
      first->block.allocate(64);
      pthread_setspecific(rearming_key, first);
    }).join();
  }
  CHECK(thread_exit_results.thread_local_failed == 0);
  CHECK(thread_exit_results.thread_local_ok == 2 * threads);
  CHECK(thread_exit_results.key_failed == 0);
  CHECK(
    thread_exit_results.key_rounds ==
    threads * PTHREAD_DESTRUCTOR_ITERATIONS);

  std::lock_guard<std::mutex> guard(thread_exit_results.lock);
  CHECK(thread_exit_results.handed_to_main.size() == threads);
  for (Stamped& block : thread_exit_results.handed_to_main)
  {
    CHECK(block.intact());
    block.release();
  }
  thread_exit_results.handed_to_main.clear();
  pthread_key_delete(rearming_key);
}
