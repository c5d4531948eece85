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
#include <functional>
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
  // A new object of `size` bytes, kept (so that none is a reuse of
  // another), and whether `count` (samples_taken, guarded_total) moved
  // while it was allocated.
  struct Watched
  {
    void* object;
    bool counted;
  };

  Watched allocate_watching(uint64_t (*count)(), size_t size, std::vector<void*>& kept)
  {
    uint64_t before = count();
    void* p = fork_sampled_site(size);
    kept.push_back(p);
    return {p, count() != before};
  }

  // Which of `n` new objects of `size` bytes were sampled, as a hash of
  // their indices.
  uint64_t sampling_signature(size_t n, size_t size, std::vector<void*>& kept)
  {
    uint64_t hash = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < n; i++)
      if (allocate_watching(snmalloc::profile::samples_taken, size, kept).counted)
        hash = (hash ^ i) * 0x100000001b3ULL;
    return hash;
  }
} // namespace

namespace
{
  // What `measure` returns in a fork child, read back through a pipe.
  template<typename Measure>
  uint64_t in_child(Measure measure)
  {
    int fds[2];
    REQUIRE(pipe(fds) == 0);
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0)
    {
      uint64_t mine = measure();
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
    return theirs;
  }

  bool all_distinct(std::vector<uint64_t> values)
  {
    std::sort(values.begin(), values.end());
    return std::adjacent_find(values.begin(), values.end()) == values.end();
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
    signatures.push_back(in_child([&] { return sampling_signature(OBJECTS, SIZE, kept); }));
  signatures.push_back(sampling_signature(OBJECTS, SIZE, kept));
  CHECK(all_distinct(signatures));
  for (void* p : kept)
    std::free(p);
}

namespace
{
  // The index of the first of `n` new objects of `size` bytes that was
  // sampled (n if none was); the objects are kept.
  uint64_t first_sampled(size_t n, size_t size, std::vector<void*>& kept)
  {
    for (size_t i = 0; i < n; i++)
      if (allocate_watching(snmalloc::profile::samples_taken, size, kept).counted)
        return i;
    return n;
  }
} // namespace

// A refill whose batch reaches the next sample point keeps the objects from
// the point on back, to be served when the objects before it run out.  A
// child forked meanwhile inherits that batch: its first sample in the
// class must still be its own draw, not the parent's point, or every
// worker's first sample there would fall on the same allocation.
TEST_CASE("a batch the parent held back at its sample point is counted afresh in a fork child")
{
  // A point every 4 objects on average: after a sample, the rest of its
  // batch mostly holds the next point back, so the parent mostly holds a
  // batch at the fork (three rounds, so that one of them does).  Where the
  // children's first samples fall is then, with the parent's point, one
  // index for all; with their own draws, a geometric spread, all alike
  // about once in 10^7.
  constexpr size_t ROUNDS = 3, CHILDREN = 12, OBJECTS = 200, SIZE = 256;
  ProfilingAt sampled(1024);
  std::vector<void*> kept;
  kept.reserve(ROUNDS * OBJECTS * (CHILDREN + 1));
  for (size_t round = 0; round < ROUNDS; round++)
  {
    first_sampled(OBJECTS, SIZE, kept);
    std::vector<uint64_t> firsts;
    for (size_t c = 0; c < CHILDREN; c++)
      firsts.push_back(in_child([&] { return first_sampled(OBJECTS, SIZE, kept); }));
    INFO("round " << round << ", each child's first sampled object: " << Catch::Detail::stringify(firsts));
    CHECK(std::adjacent_find(firsts.begin(), firsts.end(), std::not_equal_to<uint64_t>()) != firsts.end());
    for (uint64_t f : firsts)
      CHECK(f < OBJECTS); // 50 points on average in 200 objects
  }
  for (void* p : kept)
    std::free(p);
}

namespace
{
  // Which side of its slot each of the next `n` guarded objects of `size`
  // bytes took, a bit each (left-aligned objects start on a page boundary);
  // all bits set if fewer were guarded.  Objects a fast list held from
  // before sampling started are not sampled, so not guarded: passed over.
  uint64_t guarded_sides(size_t n, size_t size, std::vector<void*>& kept)
  {
    uint64_t sides = 0;
    size_t guarded = 0;
    for (size_t tries = 0; guarded < n && tries < 8 * n; tries++)
    {
      Watched w = allocate_watching(snmalloc::profile::guarded_total, size, kept);
      if (!w.counted)
        continue;
      sides = sides << 1 | uint64_t(reinterpret_cast<uintptr_t>(w.object) % 4096 != 0);
      guarded++;
    }
    return guarded == n ? sides : ~uint64_t(0);
  }
} // namespace

// The side of its slot a guarded object takes is a coin toss, so that an
// overflow and an underflow are each caught in half of the objects.  Fork
// children toss their own coins: with the parent's sequence, every worker
// of a pre-forking server would guard the same side of the same objects.
TEST_CASE("fork children and their parent choose their own guarded sides")
{
  constexpr size_t CHILDREN = 6, OBJECTS = 48, SIZE = 100;
  ProfilingAt exact(1);
  REQUIRE(snmalloc::profile::set_guard(4 * OBJECTS, 1000000) == 0);
  std::vector<void*> kept;
  kept.reserve(8 * OBJECTS * 2);
  std::vector<uint64_t> sides = {guarded_sides(OBJECTS, SIZE, kept)};
  for (size_t c = 0; c < CHILDREN; c++)
    sides.push_back(in_child([&] { return guarded_sides(OBJECTS, SIZE, kept); }));
  sides.push_back(guarded_sides(OBJECTS, SIZE, kept)); // the parent again
  INFO("sides: " << Catch::Detail::stringify(sides));
  CHECK(std::find(sides.begin(), sides.end(), ~uint64_t(0)) == sides.end());
  CHECK(all_distinct(sides));
  for (void* p : kept)
    std::free(p);
  CHECK(snmalloc::profile::set_guard(0) == 0);
}
