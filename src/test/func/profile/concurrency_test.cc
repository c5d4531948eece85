// Dumps while eight threads allocate, hand objects to each other to free,
// and exit to be replaced, while the interval changes under them.  Nothing
// may crash or deadlock (a watchdog aborts after a deadline), every dump
// must succeed, every block must keep its contents, and afterwards the
// sample lists must be exact: nothing of the stress is left live, and a
// known set held at R == 1 is counted exactly.
#include "support/files.h"
#include "support/pprof_output.h"
#include "support/profiling.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <mutex>
#include <random>

using namespace snmalloc_test;

namespace
{
  constexpr size_t THREADS = 8;
  constexpr size_t OPERATIONS_PER_THREAD = 20000; // then the thread exits
  constexpr auto STRESS_TIME = std::chrono::seconds(4);
  constexpr auto DEADLINE = std::chrono::seconds(90);

  // Every block starts with its size and a cookie derived from both, and
  // ends with the cookie again (blocks are at least 24 bytes, so the two
  // do not overlap).
  struct Header
  {
    size_t size;
    uint64_t cookie;
  };

  uint64_t cookie_of(const void* p, size_t size)
  {
    return (reinterpret_cast<uintptr_t>(p) * 0x9E3779B97F4A7C15ULL) ^ size;
  }

  void stamp(void* p, size_t size)
  {
    uint64_t cookie = cookie_of(p, size);
    Header h{size, cookie};
    std::memcpy(p, &h, sizeof(h));
    std::memcpy(static_cast<char*>(p) + size - sizeof(cookie), &cookie, sizeof(cookie));
  }

  bool intact(const void* p)
  {
    Header h;
    std::memcpy(&h, p, sizeof(h));
    uint64_t tail;
    std::memcpy(&tail, static_cast<const char*>(p) + h.size - sizeof(tail), sizeof(tail));
    return h.cookie == cookie_of(p, h.size) && tail == h.cookie;
  }

  // Blocks in flight between threads.
  class Exchange
  {
    std::mutex lock_;
    std::vector<void*> blocks_;

  public:
    void put(void* p)
    {
      std::lock_guard<std::mutex> g(lock_);
      blocks_.push_back(p);
    }

    void* take()
    {
      std::lock_guard<std::mutex> g(lock_);
      if (blocks_.empty())
        return nullptr;
      void* p = blocks_.back();
      blocks_.pop_back();
      return p;
    }
  };

  // Aborts the process, with a message, unless disarmed before DEADLINE.
  class Watchdog
  {
    std::mutex lock_;
    std::condition_variable disarmed_cv_;
    bool disarmed_ = false;
    std::thread thread_;

  public:
    Watchdog()
    : thread_([this] {
        std::unique_lock<std::mutex> g(lock_);
        if (!disarmed_cv_.wait_for(g, DEADLINE, [this] { return disarmed_; }))
        {
          std::fprintf(stderr, "watchdog: no end after %lld s: deadlock\n",
                       static_cast<long long>(DEADLINE.count()));
          std::abort();
        }
      })
    {}

    ~Watchdog()
    {
      {
        std::lock_guard<std::mutex> g(lock_);
        disarmed_ = true;
      }
      disarmed_cv_.notify_all();
      thread_.join();
    }
  };
} // namespace

__attribute__((noinline)) void* stress_site(size_t size)
{
  void* p = std::malloc(size);
  stamp(p, size);
  return p;
}

__attribute__((noinline)) void known_site(std::vector<void*>& out, size_t n, size_t size)
{
  for (size_t i = 0; i < n; i++)
    out.push_back(std::malloc(size));
}

namespace
{
  // Mostly small blocks, some page-sized, a few large.
  size_t random_size(std::mt19937_64& rng)
  {
    uint64_t r = rng();
    size_t kind = r % 100;
    r >>= 8;
    if (kind < 85)
      return 24 + r % 1000;
    if (kind < 98)
      return 4096 + r % 30000;
    return 70000 + r % 300000;
  }

  void check_and_free(void* p, std::atomic<size_t>& damaged)
  {
    if (!intact(p))
      damaged++;
    std::free(p);
  }

  // One worker's life: OPERATIONS_PER_THREAD steps, then exit.  Half of
  // its blocks are freed by whichever thread takes them from the exchange,
  // the others by itself, in random order.
  void worker(Exchange& exchange, uint64_t seed, std::atomic<size_t>& damaged)
  {
    std::mt19937_64 rng(seed);
    std::vector<void*> mine;
    for (size_t i = 0; i < OPERATIONS_PER_THREAD; i++)
    {
      void* p = stress_site(random_size(rng));
      if (rng() % 2 == 0)
        exchange.put(p);
      else
        mine.push_back(p);
      if (void* q = exchange.take())
        check_and_free(q, damaged);
      if (mine.size() > 64)
      {
        size_t victim = rng() % mine.size();
        check_and_free(mine[victim], damaged);
        mine[victim] = mine.back();
        mine.pop_back();
      }
    }
    // What is left goes to others (or to the final drain).
    for (void* p : mine)
      exchange.put(p);
  }
} // namespace

TEST_CASE("dumps while threads allocate, free each other's blocks and are replaced")
{
  const size_t small_usable = usable_size_unsampled(48);
  const size_t large_usable = usable_size_unsampled(200000);
  Watchdog watchdog;
  TempDir dir;
  Exchange exchange;
  std::atomic<size_t> damaged{0};
  std::atomic<bool> stop{false};
  size_t dumps = 0, failed_dumps = 0, threads_started = 0;
  {
    ProfilingAt sampling(4096);

    // Threads run their course and are replaced until the time is up.
    std::thread spawner([&] {
      std::vector<std::thread> threads;
      auto start_worker = [&] {
        uint64_t seed = ++threads_started;
        threads.emplace_back([&, seed] { worker(exchange, seed, damaged); });
      };
      for (size_t i = 0; i < THREADS; i++)
        start_worker();
      while (!stop)
      {
        // Replace the oldest thread once it has finished.
        threads.front().join();
        threads.erase(threads.begin());
        start_worker();
      }
      for (std::thread& t : threads)
        t.join();
    });

    // Meanwhile: change the interval now and then, and dump.
    const size_t intervals[] = {4096, 512, 65536, 1};
    auto until = std::chrono::steady_clock::now() + STRESS_TIME;
    for (size_t round = 0; std::chrono::steady_clock::now() < until; round++)
    {
      REQUIRE(snmalloc::profile::start(intervals[round % std::size(intervals)]) == 0);
      if (!snmalloc::profile::dump(dir.file("during.pb.gz").c_str()).ok())
        failed_dumps++;
      dumps++;
    }
    stop = true;
    spawner.join();
    CHECK(dumps >= 4);
    CHECK(failed_dumps == 0);
    CHECK(threads_started > THREADS);

    // The last dump taken under load reads back.
    CHECK_FALSE(read_raw(dir.file("during.pb.gz")).samples.empty());

    // Drain what is still in flight.
    while (void* p = exchange.take())
    {
      if (!intact(p))
        damaged++;
      std::free(p);
    }
    CHECK(damaged == 0);

    // Now exact: the stress left nothing live, and a known set is counted
    // exactly (no sample lost or counted twice).
    REQUIRE(snmalloc::profile::start(1) == 0);
    std::vector<void*> known;
    known.reserve(1100);
    on_fresh_thread([&] {
      known_site(known, 1000, 48);
      known_site(known, 10, 200000);
    });
    dump_or_fail(dir.file("after.pb.gz"));
    for (void* p : known)
      std::free(p);
  }

  SiteTable after(dir.file("after.pb.gz"));
  CHECK(after["stress_site"].inuse_objects == 0);
  CHECK(after["stress_site"].inuse_space == 0);
  CHECK(after["stress_site"].alloc_objects > 0);
  CHECK(after["known_site"].alloc_objects == 1010);
  CHECK(after["known_site"].inuse_objects == 1010);
  CHECK(after["known_site"].inuse_space == int64_t(1000 * small_usable + 10 * large_usable));
}
