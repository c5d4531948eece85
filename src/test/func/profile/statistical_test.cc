// Statistical accuracy at one sampling interval R (PROFILE_TEST_INTERVAL,
// set by CMake; one executable per interval).  The program holds known live
// bytes at distinct sites, in the shapes that stress the sampler: tiny
// objects, page-sized ones, blocks larger than R, objects allocated by four
// threads, objects kept after their thread exited; and objects that must
// not show: freed by another thread, and churn freed before the dump.
//
// Tolerance.  An object of s bytes is sampled with probability
// p = 1 - exp(-s/R) (Poisson sample points on the byte stream; objects are
// disjoint stretches of it, so independently), and a sampled one counts
// s/p bytes and 1/p objects.  For n objects the bytes estimate has mean
// n*s and variance n * s^2 * (1-p)/p; the objects estimate n and
// n * (1-p)/p.  Each site holds n = TARGET * (1-p)/p objects (at least 16),
// so its relative standard deviation is 1/sqrt(TARGET) (3.2% at TARGET
// 1000, 5% at 400).  A check allows 5 standard deviations, plus one
// object's worth for pprof's rounding of each value to an integer.  The
// number of sampled objects is binomial, close to Poisson with mean TARGET
// for small objects; its 5-sigma two-sided tail is below 1e-6 for TARGET
// >= 400, and one run makes seven independent such checks (the bytes and
// objects estimates of a site move together): a false failure about once
// in 100,000 runs.
#include "support/files.h"
#include "support/pprof_output.h"
#include "support/profiling.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <malloc.h>

using namespace snmalloc_test;

#ifndef PROFILE_TEST_INTERVAL
#  error "PROFILE_TEST_INTERVAL (the sampling interval R) must be defined"
#endif
#ifndef PROFILE_TEST_TARGET_SAMPLES
#  error "PROFILE_TEST_TARGET_SAMPLES must be defined"
#endif

namespace
{
  constexpr size_t R = PROFILE_TEST_INTERVAL;
  constexpr double TARGET = PROFILE_TEST_TARGET_SAMPLES;
  constexpr double SIGMAS = 5;

  // Object sizes, each a sizeclass size (or a power of two for the large
  // one), so each object's usable size is exactly its request.
  constexpr size_t TINY = 32, PAGE = 4096, LARGE = size_t(1) << 20;
  constexpr size_t THREADS_SIZE = 256, EXITED_SIZE = 128;
  constexpr size_t REMOTE_SIZE = 512, CHURN_SIZE = 96;
  constexpr size_t THREADS = 4;
  constexpr size_t CHURN_FACTOR = 4; // churn allocates 4 sites' worth

  double sample_probability(size_t size)
  {
    return -std::expm1(-double(size) / double(R));
  }

  // Objects a site holds for a relative standard deviation 1/sqrt(TARGET).
  size_t objects_for(size_t size)
  {
    double p = sample_probability(size);
    return std::max<size_t>(16, size_t(std::ceil(TARGET * (1 - p) / p)));
  }
} // namespace

__attribute__((noinline)) Node* stat_site_tiny(size_t n)
{
  return allocate_chain(TINY, n);
}

__attribute__((noinline)) Node* stat_site_page(size_t n)
{
  return allocate_chain(PAGE, n);
}

// Blocks larger than R are not written: they cost no resident memory.
__attribute__((noinline)) void stat_site_large(std::vector<void*>& blocks, size_t n)
{
  for (size_t i = 0; i < n; i++)
    blocks.push_back(std::malloc(LARGE));
}

__attribute__((noinline)) Node* stat_site_threads(size_t n)
{
  return allocate_chain(THREADS_SIZE, n);
}

__attribute__((noinline)) Node* stat_site_exited_thread(size_t n)
{
  return allocate_chain(EXITED_SIZE, n);
}

__attribute__((noinline)) Node* stat_site_freed_remotely(size_t n)
{
  return allocate_chain(REMOTE_SIZE, n);
}

__attribute__((noinline)) void stat_site_churn(size_t n)
{
  constexpr size_t BATCH = 1000;
  for (size_t done = 0; done < n; done += BATCH)
    free_chain(allocate_chain(CHURN_SIZE, std::min(BATCH, n - done)));
}

namespace
{
  // |estimate - truth| within SIGMAS standard deviations plus one object.
  void check_estimate(
    const char* what, int64_t estimate, size_t n, size_t size, bool bytes)
  {
    double p = sample_probability(size);
    double unit = bytes ? double(size) : 1.0;
    double truth = double(n) * unit;
    double sd = unit * std::sqrt(double(n) * (1 - p) / p);
    double allowed = SIGMAS * sd + unit;
    INFO(what << ": estimate " << estimate << ", truth " << truth << ", allowed +-"
              << allowed << " (" << n << " objects of " << size << " B, R " << R << ")");
    CHECK(std::fabs(double(estimate) - truth) <= allowed);
  }

  void check_live(const SiteTable& table, const char* site, size_t n, size_t size)
  {
    SiteValues v = table[site];
    INFO("site " << site);
    check_estimate("inuse_space", v.inuse_space, n, size, true);
    check_estimate("inuse_objects", v.inuse_objects, n, size, false);
  }

  // Freed before the dump: nothing live, but the allocations are counted.
  void check_gone(const SiteTable& table, const char* site, size_t n, size_t size)
  {
    SiteValues v = table[site];
    INFO("site " << site);
    CHECK(v.inuse_space == 0);
    CHECK(v.inuse_objects == 0);
    check_estimate("alloc_space", v.alloc_space, n, size, true);
  }
} // namespace

TEST_CASE("statistical accuracy of every site's estimate")
{
  for (size_t size : {TINY, PAGE, LARGE, THREADS_SIZE, EXITED_SIZE, REMOTE_SIZE, CHURN_SIZE})
  {
    void* p = std::malloc(size);
    REQUIRE(malloc_usable_size(p) == size);
    std::free(p);
  }
  const size_t n_tiny = objects_for(TINY), n_page = objects_for(PAGE);
  const size_t n_large = objects_for(LARGE);
  const size_t n_threads = objects_for(THREADS_SIZE) / THREADS * THREADS;
  const size_t n_exited = objects_for(EXITED_SIZE), n_remote = objects_for(REMOTE_SIZE);
  const size_t n_churn = CHURN_FACTOR * objects_for(CHURN_SIZE);

  TempDir dir;
  Node *tiny = nullptr, *page = nullptr, *exited = nullptr, *remote = nullptr;
  Node* by_thread[THREADS] = {};
  std::vector<void*> large;
  large.reserve(n_large);
  {
    ProfilingAt sampling(R);
    // Every site runs on a thread started after start(), so no object comes
    // from a free list filled before sampling began.
    on_fresh_thread([&] {
      tiny = stat_site_tiny(n_tiny);
      page = stat_site_page(n_page);
      stat_site_large(large, n_large);
      stat_site_churn(n_churn);
    });
    std::vector<std::thread> threads;
    for (size_t t = 0; t < THREADS; t++)
      threads.emplace_back([&, t] { by_thread[t] = stat_site_threads(n_threads / THREADS); });
    for (std::thread& t : threads)
      t.join();
    // This thread exits; its objects stay live.
    on_fresh_thread([&] { exited = stat_site_exited_thread(n_exited); });
    // Allocated on one thread, freed on another.
    on_fresh_thread([&] { remote = stat_site_freed_remotely(n_remote); });
    on_fresh_thread([&] { free_chain(remote); });

    dump_or_fail(dir.file("statistical.pb.gz"));
  }

  SiteTable table(dir.file("statistical.pb.gz"));
  check_live(table, "stat_site_tiny", n_tiny, TINY);
  check_live(table, "stat_site_page", n_page, PAGE);
  check_live(table, "stat_site_large", n_large, LARGE);
  check_live(table, "stat_site_threads", n_threads, THREADS_SIZE);
  check_live(table, "stat_site_exited_thread", n_exited, EXITED_SIZE);
  check_gone(table, "stat_site_freed_remotely", n_remote, REMOTE_SIZE);
  check_gone(table, "stat_site_churn", n_churn, CHURN_SIZE);

  free_chain(tiny);
  free_chain(page);
  free_chain(exited);
  for (Node* chain : by_thread)
    free_chain(chain);
  for (void* p : large)
    std::free(p);
}
