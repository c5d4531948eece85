// Statistical accuracy of the count and sizeclass sampling modes at one
// rate N (PROFILE_TEST_MODE and PROFILE_TEST_RATE, set by CMake; one
// executable per mode and rate), read back with `go tool pprof`.  The
// shapes are those of statistical_test.cc: tiny and 1 KiB objects, large
// ones (the slow path, which counts allocations in these modes too),
// objects of four threads, of an exited thread, and objects that must not
// show: freed by another thread, and churn freed before the dump.
//
// Tolerance.  In count mode each object is sampled with p = 1/N and a
// sample stands for N objects and N * size bytes.  A site of n objects has
// k ~ Binomial(n, 1/N) samples; the estimate N*k has mean n and variance
// n*(N-1).  In sizeclass mode k is a sum of independent Bernoullis, one per
// block of N allocations of the class, of mean n/N and a variance at most
// the binomial's (sample_mode.h), so the same bound holds.  Sites hold
// n = TARGET * N objects (large ones LARGE_TARGET * N: they cost address
// space), for TARGET = 400 expected samples (100 for large ones): a
// relative standard deviation of 5% (10%).  A check allows 5 standard
// deviations plus one object for pprof's rounding.  Exact binomial tails
// beyond that, at N = 16 and N = 256: 8.2e-7 and 8.7e-7 at a mean of 400
// samples, 1.3e-6 and 1.8e-6 at 100; seven independent sites are checked
// (a site's object and byte estimates move together): a false failure
// about once in 130,000 runs.
// Sizeclass mode also gets a check that needs its strata: a site of one
// sizeclass allocated in one run has k within 2 + 2% of n/N (blocks cut
// the run at both ends; the profiler's own allocations of the class may
// fall in between).
#include "support/files.h"
#include "support/pprof_output.h"
#include "support/profiling.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <malloc.h>

using namespace snmalloc_test;
using snmalloc::profile::SampleMode;

#ifndef PROFILE_TEST_MODE
#  error "PROFILE_TEST_MODE (count or sizeclass) must be defined"
#endif
#ifndef PROFILE_TEST_RATE
#  error "PROFILE_TEST_RATE (the rate N, in allocations) must be defined"
#endif

namespace
{
  constexpr SampleMode MODE = SampleMode::PROFILE_TEST_MODE;
  constexpr size_t N = PROFILE_TEST_RATE;
  constexpr size_t TARGET = 400, LARGE_TARGET = 100;
  constexpr double SIGMAS = 5;

  // Each a sizeclass size (the large one a chunk multiple), so each
  // object's usable size is exactly its request.
  constexpr size_t TINY = 32, KIB = 1024, LARGE = 80 * 1024;
  constexpr size_t THREADS_SIZE = 256, EXITED_SIZE = 128;
  constexpr size_t REMOTE_SIZE = 512, CHURN_SIZE = 96;
  constexpr size_t THREADS = 4;
  constexpr size_t CHURN_FACTOR = 4;
} // namespace

__attribute__((noinline)) Node* mode_site_tiny(size_t n)
{
  return allocate_chain(TINY, n);
}

__attribute__((noinline)) Node* mode_site_kib(size_t n)
{
  return allocate_chain(KIB, n);
}

// Not written: they cost address space only.
__attribute__((noinline)) void mode_site_large(std::vector<void*>& blocks, size_t n)
{
  for (size_t i = 0; i < n; i++)
    blocks.push_back(std::malloc(LARGE));
}

__attribute__((noinline)) Node* mode_site_threads(size_t n)
{
  return allocate_chain(THREADS_SIZE, n);
}

__attribute__((noinline)) Node* mode_site_exited_thread(size_t n)
{
  return allocate_chain(EXITED_SIZE, n);
}

__attribute__((noinline)) Node* mode_site_freed_remotely(size_t n)
{
  return allocate_chain(REMOTE_SIZE, n);
}

__attribute__((noinline)) void mode_site_churn(size_t n)
{
  constexpr size_t BATCH = 1000;
  for (size_t done = 0; done < n; done += BATCH)
    free_chain(allocate_chain(CHURN_SIZE, std::min(BATCH, n - done)));
}

namespace
{
  void check_estimate(const char* what, int64_t estimate, size_t n, size_t size, bool bytes)
  {
    double unit = bytes ? double(size) : 1.0;
    double truth = double(n) * unit;
    double sd = unit * std::sqrt(double(n) * double(N - 1));
    double allowed = SIGMAS * sd + unit;
    INFO(what << ": estimate " << estimate << ", truth " << truth << ", allowed +-" << allowed
              << " (" << n << " objects of " << size << " B, mode "
              << snmalloc::profile::mode_name(MODE) << ", N " << N << ")");
    CHECK(std::fabs(double(estimate) - truth) <= allowed);
    // Every sample stands for exactly N objects.
    CHECK(estimate % int64_t(N * (bytes ? size : 1)) == 0);
  }

  void check_live(const SiteTable& table, const char* site, size_t n, size_t size)
  {
    SiteValues v = table[site];
    INFO("site " << site);
    check_estimate("inuse_space", v.inuse_space, n, size, true);
    check_estimate("inuse_objects", v.inuse_objects, n, size, false);
  }

  // One run of one sizeclass in sizeclass mode: k within 2 + 2% of n/N.
  void check_stratified(const SiteTable& table, const char* site, size_t n)
  {
    if constexpr (MODE == SampleMode::SizeClass)
    {
      double k = double(table[site].inuse_objects) / double(N);
      double expected = double(n) / double(N);
      INFO("site " << site << ": " << k << " samples, " << expected << " expected");
      CHECK(std::fabs(k - expected) <= 2 + 0.02 * expected);
    }
  }

  void check_gone(const SiteTable& table, const char* site, size_t n, size_t size)
  {
    SiteValues v = table[site];
    INFO("site " << site);
    CHECK(v.inuse_space == 0);
    CHECK(v.inuse_objects == 0);
    check_estimate("alloc_space", v.alloc_space, n, size, true);
    check_estimate("alloc_objects", v.alloc_objects, n, size, false);
  }
} // namespace

TEST_CASE("statistical accuracy of every site's estimate in this mode")
{
  for (size_t size : {TINY, KIB, LARGE, THREADS_SIZE, EXITED_SIZE, REMOTE_SIZE, CHURN_SIZE})
  {
    void* p = std::malloc(size);
    REQUIRE(malloc_usable_size(p) == size);
    std::free(p);
  }
  const size_t n = TARGET * N, n_large = LARGE_TARGET * N;
  const size_t n_threads = n / THREADS * THREADS, n_churn = CHURN_FACTOR * n;

  TempDir dir;
  Node *tiny = nullptr, *kib = nullptr, *exited = nullptr, *remote = nullptr;
  Node* by_thread[THREADS] = {};
  std::vector<void*> large;
  large.reserve(n_large);
  {
    ProfilingAt sampling(MODE, N);
    on_fresh_thread([&] {
      tiny = mode_site_tiny(n);
      kib = mode_site_kib(n);
      mode_site_large(large, n_large);
      mode_site_churn(n_churn);
    });
    std::vector<std::thread> threads;
    for (size_t t = 0; t < THREADS; t++)
      threads.emplace_back([&, t] { by_thread[t] = mode_site_threads(n_threads / THREADS); });
    for (std::thread& t : threads)
      t.join();
    on_fresh_thread([&] { exited = mode_site_exited_thread(n); });
    on_fresh_thread([&] { remote = mode_site_freed_remotely(n); });
    on_fresh_thread([&] { free_chain(remote); });

    dump_or_fail(dir.file("mode.pb.gz"));
  }

  // The profile says its mode.
  RawProfile raw = read_raw(dir.file("mode.pb.gz"));
  CHECK(raw.period_type == "objects count");
  CHECK(raw.period == int64_t(N));

  SiteTable table(dir.file("mode.pb.gz"));
  check_live(table, "mode_site_tiny", n, TINY);
  check_live(table, "mode_site_kib", n, KIB);
  check_live(table, "mode_site_large", n_large, LARGE);
  check_live(table, "mode_site_threads", n_threads, THREADS_SIZE);
  check_live(table, "mode_site_exited_thread", n, EXITED_SIZE);
  check_gone(table, "mode_site_freed_remotely", n, REMOTE_SIZE);
  check_gone(table, "mode_site_churn", n_churn, CHURN_SIZE);
  check_stratified(table, "mode_site_tiny", n);
  check_stratified(table, "mode_site_kib", n);
  check_stratified(table, "mode_site_large", n_large);
  check_stratified(table, "mode_site_exited_thread", n);

  free_chain(tiny);
  free_chain(kib);
  free_chain(exited);
  for (Node* chain : by_thread)
    free_chain(chain);
  for (void* p : large)
    std::free(p);
}
