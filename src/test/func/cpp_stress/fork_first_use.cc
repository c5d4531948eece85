// fork() while other threads make their first calls into the allocator.
// A process that uses snmalloc as a library (malloc stays glibc's) may
// start threads before anything has touched the allocator; their first
// calls set it up, under its locks.  A fork at that moment must leave the
// child an allocator it can use: every lock free, nothing half set up.
//
// Each trial is a fresh process (the setup happens once per process): the
// driver runs TRIALS of them.  In a trial, threads start together, some
// making a first allocation (small, large, zeroed), one trimming, one
// reading the statistics, while another forks as fast as it can; each
// child allocates, frees, trims and exits.  A child that has not exited
// within CHILD_LIMIT_S is stuck on something its parent's threads held:
// the trial kills it and fails.  A trial itself stuck (a fork that never
// returns) ends at TRIAL_LIMIT_S, and the driver stops after
// FAILED_TRIALS_LIMIT failures, so that a failure is named well within
// the test's timeout.
#include "support/child_wait.h"

#include <snmalloc/snmalloc.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace
{
  constexpr int CHILD_LIMIT_S = 20;
  constexpr unsigned TRIAL_LIMIT_S = 60;
  constexpr int FAILED_TRIALS_LIMIT = 3;
  constexpr int FORKS_PER_TRIAL = 12;
  std::atomic<bool> go{false};

  // What a child does with an allocator its parent was setting up: 0 when
  // all of it worked.
  int child_body()
  {
    for (size_t size : {size_t(24), size_t(4000), size_t(100000), size_t(3) << 20})
    {
      void* p = snmalloc::alloc_zeroed(size);
      if (p == nullptr)
        return 2;
      if (static_cast<unsigned char*>(p)[size - 1] != 0)
        return 3;
      std::memset(p, 0x5a, size);
      snmalloc::dealloc(p);
    }
    snmalloc::trim();
    (void)snmalloc::stats();
    return 0;
  }

  void wait_for_go()
  {
    while (!go.load(std::memory_order_acquire))
      std::this_thread::yield();
  }

  int trial(unsigned seed)
  {
    std::vector<std::thread> threads;
    // The first calls, one kind per thread, the seed choosing the sizes.
    threads.emplace_back([seed] {
      wait_for_go();
      void* p = snmalloc::alloc(16 + seed % 200);
      snmalloc::dealloc(p);
    });
    threads.emplace_back([seed] {
      wait_for_go();
      void* p = snmalloc::alloc_zeroed((size_t(1) << 20) + (seed % 7) * 4096);
      snmalloc::dealloc(p);
    });
    threads.emplace_back([] {
      wait_for_go();
      snmalloc::trim();
    });
    threads.emplace_back([] {
      wait_for_go();
      (void)snmalloc::stats();
    });
    int failures = 0;
    std::thread forker([&failures] {
      wait_for_go();
      for (int i = 0; i < FORKS_PER_TRIAL; i++)
      {
        pid_t child = fork();
        if (child == 0)
          _exit(child_body());
        if (child < 0)
        {
          std::perror("fork");
          failures++;
          continue;
        }
        int status = snmalloc_test::wait_with_limit(child, std::chrono::seconds(CHILD_LIMIT_S));
        if (status == -1)
          std::fprintf(stderr, "fork_first_use: child %d of fork %d hung\n", int(child), i);
        else if (!snmalloc_test::exited_cleanly(status))
          std::fprintf(stderr, "fork_first_use: child of fork %d failed (status %d)\n", i, status);
        else
          continue;
        failures++;
        break; // one is enough, and the next could take as long
      }
    });
    go.store(true, std::memory_order_release);
    for (auto& t : threads)
      t.join();
    forker.join();
    return failures == 0 ? 0 : 1;
  }
}

int main(int argc, char** argv)
{
  if (argc == 3 && std::strcmp(argv[1], "--trial") == 0)
  {
    alarm(TRIAL_LIMIT_S); // SIGALRM ends a trial stuck in its parent
    return trial(unsigned(std::strtoul(argv[2], nullptr, 10)));
  }
  int trials = argc > 1 ? std::atoi(argv[1]) : 200;
  int failed = 0;
  int t = 0;
  for (; t < trials && failed < FAILED_TRIALS_LIMIT; t++)
  {
    std::string seed = std::to_string(t);
    pid_t pid = fork();
    if (pid == 0)
    {
      // A fresh image: this process has not touched the allocator, but a
      // fork of it would inherit what the driver did.
      execl("/proc/self/exe", argv[0], "--trial", seed.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
    {
      std::fprintf(stderr, "fork_first_use: trial %d failed (status %d)\n", t, status);
      failed++;
    }
  }
  std::printf("fork_first_use: %d of %d trials failed\n", failed, t);
  return failed == 0 ? 0 : 1;
}
