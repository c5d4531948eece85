// fork() while threads allocate with profiling on: the child can allocate
// at once, take samples, dump, and exit; its profile reads in pprof and
// holds both the samples it inherited and the ones it took.  Repeated, so a
// lock left held across fork would show as a hung child (killed after a
// timeout and reported).
#include "support/child_wait.h"
#include "support/files.h"
#include "support/pprof_output.h"
#include "support/profiling.h"

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <random>
#include <sys/wait.h>
#include <unistd.h>

using namespace snmalloc_test;

namespace
{
  constexpr size_t FORKS = 8;
  constexpr size_t BACKGROUND_THREADS = 3;
  constexpr size_t PARENT_OBJECTS = 500, CHILD_OBJECTS = 300;
  constexpr auto CHILD_TIMEOUT = std::chrono::seconds(30);

  std::vector<void*> parent_kept, child_kept;
} // namespace

__attribute__((noinline)) void fork_parent_site(size_t n)
{
  for (size_t i = 0; i < n; i++)
    parent_kept.push_back(std::malloc(64));
}

__attribute__((noinline)) void fork_child_site(size_t n)
{
  for (size_t i = 0; i < n; i++)
    child_kept.push_back(std::malloc(i % 50 == 0 ? 150000 : 200));
}

__attribute__((noinline)) void fork_background_site(std::mt19937_64& rng, std::vector<void*>& mine)
{
  mine.push_back(std::malloc(16 + rng() % 20000));
}

namespace
{
  // In the child: sample everything on a new thread, dump, exit.  Only the
  // exit status reports back (no test framework in the child).
  [[noreturn]] void child(const std::string& path)
  {
    if (snmalloc::profile::start(1) != 0)
      _exit(2);
    std::thread([] { fork_child_site(CHILD_OBJECTS); }).join();
    _exit(snmalloc::profile::dump(path.c_str()).ok() ? 0 : 3);
  }
} // namespace

TEST_CASE("fork while threads allocate: the child samples, dumps and exits")
{
  const size_t parent_usable = usable_size_unsampled(64);
  TempDir dir;
  parent_kept.reserve(PARENT_OBJECTS);
  child_kept.reserve(CHILD_OBJECTS);
  ProfilingAt exact(1);
  on_fresh_thread([] { fork_parent_site(PARENT_OBJECTS); });

  // Sampling often, so the profiler's locks are taken all the time.
  REQUIRE(snmalloc::profile::start(1024) == 0);
  std::atomic<bool> stop{false};
  std::atomic<size_t> background_allocations{0};
  std::vector<std::thread> background;
  for (size_t t = 0; t < BACKGROUND_THREADS; t++)
    background.emplace_back([&, t] {
      std::mt19937_64 rng(t);
      std::vector<void*> mine;
      while (!stop)
      {
        fork_background_site(rng, mine);
        background_allocations++;
        if (mine.size() > 200)
        {
          for (void* p : mine)
            std::free(p);
          mine.clear();
        }
      }
      for (void* p : mine)
        std::free(p);
    });

  // Fork only once the threads are busy (and have been sampled).
  while (background_allocations < 1000 * BACKGROUND_THREADS)
    std::this_thread::yield();

  std::vector<std::string> profiles;
  for (size_t i = 0; i < FORKS; i++)
  {
    std::string path = dir.file("child-" + std::to_string(i) + ".pb.gz");
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0)
      child(path);
    int status = snmalloc_test::wait_with_limit(pid, CHILD_TIMEOUT);
    INFO("child " << i);
    REQUIRE(status != -1); // else it hung: a lock held across fork?
    REQUIRE(WIFEXITED(status));
    REQUIRE(WEXITSTATUS(status) == 0);
    profiles.push_back(path);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  stop = true;
  for (std::thread& t : background)
    t.join();

  for (const std::string& path : profiles)
  {
    INFO(path);
    SiteTable table(path);
    // Inherited from the parent, exactly.
    CHECK(table["fork_parent_site"].inuse_objects == int64_t(PARENT_OBJECTS));
    CHECK(table["fork_parent_site"].inuse_space == int64_t(PARENT_OBJECTS * parent_usable));
    // Taken in the child, exactly.
    CHECK(table["fork_child_site"].alloc_objects == int64_t(CHILD_OBJECTS));
    CHECK(table["fork_child_site"].inuse_objects == int64_t(CHILD_OBJECTS));
    CHECK(table["fork_background_site"].alloc_objects > 0);
  }
  // The parent never ran the child's site.
  dump_or_fail(dir.file("parent.pb.gz"));
  CHECK(SiteTable(dir.file("parent.pb.gz"))["fork_child_site"].alloc_objects == 0);
  for (void* p : parent_kept)
    std::free(p);
}

namespace
{
  // The thread id recorded with the sample of `p`, or 0 if it has none.
  uint32_t sampled_thread_id(void* p)
  {
    for (const snmalloc::profile::SampleView& v : snmalloc::profile::snapshot_live_samples())
    {
      if (v.address == reinterpret_cast<uintptr_t>(p))
        return v.thread_id;
    }
    return 0;
  }
} // namespace

// Sample records cache the thread id; a fork child's thread has another.
// Large objects, as every large allocation reaches the sampling slow path
// (a small one could come from a fast list filled before the start).
TEST_CASE("a fork child's samples carry the child's thread id, not the parent's")
{
  constexpr size_t LARGE = 100000;
  ProfilingAt exact(1);
  void* before = std::malloc(LARGE);
  REQUIRE(sampled_thread_id(before) == uint32_t(gettid()));
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0)
  {
    void* in_child = std::malloc(LARGE);
    _exit(sampled_thread_id(in_child) == uint32_t(gettid()) ? 0 : 4);
  }
  int status = snmalloc_test::wait_with_limit(pid, CHILD_TIMEOUT);
  REQUIRE(status != -1);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  void* after = std::malloc(LARGE);
  CHECK(sampled_thread_id(after) == uint32_t(gettid()));
  std::free(after);
  std::free(before);
}

__attribute__((noinline)) void* fork_sampled_site(size_t size)
{
  return std::malloc(size);
}

namespace
{
  // Which of `n` new objects of `size` bytes were sampled, as a hash of
  // their indices (samples_taken moves at each); the objects are kept, so
  // that none is a reuse of another.
  uint64_t sampling_signature(size_t n, size_t size, std::vector<void*>& kept)
  {
    uint64_t hash = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < n; i++)
    {
      uint64_t before = snmalloc::profile::samples_taken();
      kept.push_back(fork_sampled_site(size));
      if (snmalloc::profile::samples_taken() != before)
        hash = (hash ^ i) * 0x100000001b3ULL;
    }
    return hash;
  }
} // namespace

// Children forked from one parent (a pre-forking server's workers) each
// draw their own sample points: were they the parent's, every worker's
// profile would err the same way, and a periodic pattern would be hit or
// missed alike in all of them.
TEST_CASE("fork children and their parent draw different sample points")
{
  constexpr size_t CHILDREN = 5, OBJECTS = 600, SIZE = 3000;
  ProfilingAt sampled(4096);
  std::vector<void*> kept;
  sampling_signature(OBJECTS, SIZE, kept); // the parent's generator is seeded
  std::vector<uint64_t> signatures;
  for (size_t c = 0; c < CHILDREN; c++)
  {
    int fds[2];
    REQUIRE(pipe(fds) == 0);
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0)
    {
      uint64_t mine = sampling_signature(OBJECTS, SIZE, kept);
      _exit(write(fds[1], &mine, sizeof(mine)) == ssize_t(sizeof(mine)) ? 0 : 5);
    }
    close(fds[1]);
    uint64_t theirs = 0;
    ssize_t got = read(fds[0], &theirs, sizeof(theirs));
    close(fds[0]);
    int status = snmalloc_test::wait_with_limit(pid, CHILD_TIMEOUT);
    REQUIRE(status != -1);
    REQUIRE(snmalloc_test::exited_cleanly(status));
    REQUIRE(got == ssize_t(sizeof(theirs)));
    signatures.push_back(theirs);
  }
  signatures.push_back(sampling_signature(OBJECTS, SIZE, kept));
  std::sort(signatures.begin(), signatures.end());
  CHECK(std::adjacent_find(signatures.begin(), signatures.end()) == signatures.end());
  for (void* p : kept)
    std::free(p);
}
