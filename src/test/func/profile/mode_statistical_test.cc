// Statistical accuracy of the count and sizeclass sampling modes at one
// rate N (its setting, "MODE N", MODE count or sizeclass:
// support/profiling.h; ctest runs it at two of each), read back with
// `go tool pprof`.  The sites are statistical_test.cc's (support/statistical.h): tiny and 1 KiB
// objects, large ones (the slow path, which counts allocations in these
// modes too), objects of four threads, of an exited thread, and objects
// that must not show: freed by another thread, and churn freed before the
// dump.
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
#include "support/statistical.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

using namespace snmalloc_test;
using namespace snmalloc_test::statistical;
using snmalloc::profile::SampleMode;

namespace
{
  // Count when there is no setting (the test cases only listed).
  SampleMode mode_setting()
  {
    std::string name = test_setting(0);
    SampleMode mode = SampleMode::Count;
    if (!name.empty() &&
        (!snmalloc::profile::parse_mode(name.data(), name.size(), mode) || mode == SampleMode::Bytes))
    {
      std::fprintf(stderr, "PROFILE_TEST_SETTING: the mode %s is not count or sizeclass\n", name.c_str());
      std::exit(2);
    }
    return mode;
  }

  const SampleMode MODE = mode_setting();
  const size_t N = test_setting_number(1);
  constexpr size_t TARGET = 400, LARGE_TARGET = 100;

  // The medium and large sizes, a sizeclass size and a chunk multiple, so
  // each object's usable size is exactly its request.
  constexpr size_t KIB = 1024, LARGE = 80 * 1024;

  // The estimate N*k of a site of n objects has variance n*(N-1).
  double variance_per_object(size_t)
  {
    return double(N - 1);
  }

  const Estimator estimator{
    variance_per_object,
    N,
    std::string("mode ") + snmalloc::profile::mode_name(MODE) + ", N " + std::to_string(N)};

  // One run of one sizeclass in sizeclass mode: k within 2 + 2% of n/N.
  void check_stratified(const SiteTable& table, const char* site, size_t n)
  {
    if (MODE == SampleMode::SizeClass)
    {
      double k = double(table[site].inuse_objects) / double(N);
      double expected = double(n) / double(N);
      INFO("site " << site << ": " << k << " samples, " << expected << " expected");
      CHECK(std::fabs(k - expected) <= 2 + 0.02 * expected);
    }
  }
} // namespace

TEST_CASE("statistical accuracy of every site's estimate in this mode")
{
  require_test_setting();
  const size_t n = TARGET * N, n_large = LARGE_TARGET * N;
  const Counts counts{n, n, n_large, n / THREADS * THREADS, n, n, CHURN_FACTOR * n};
  Sites sites(KIB, LARGE, counts);
  sites.check_usable_sizes();

  TempDir dir;
  {
    ProfilingAt sampling(MODE, N);
    sites.run();
    dump_or_fail(dir.file("mode.pb.gz"));
  }

  // The profile says its mode.
  RawProfile raw = read_raw(dir.file("mode.pb.gz"));
  CHECK(raw.period_type == "objects count");
  CHECK(raw.period == int64_t(N));

  SiteTable table(dir.file("mode.pb.gz"));
  check_live(table, SITE_TINY, n, TINY, estimator);
  check_live(table, SITE_MEDIUM, n, KIB, estimator);
  check_live(table, SITE_LARGE, n_large, LARGE, estimator);
  check_live(table, SITE_THREADS, counts.threads, THREADS_SIZE, estimator);
  check_live(table, SITE_EXITED_THREAD, n, EXITED_SIZE, estimator);
  check_gone(table, SITE_FREED_REMOTELY, n, REMOTE_SIZE, estimator, true);
  check_gone(table, SITE_CHURN, counts.churn, CHURN_SIZE, estimator, true);
  check_stratified(table, SITE_TINY, n);
  check_stratified(table, SITE_MEDIUM, n);
  check_stratified(table, SITE_LARGE, n_large);
  check_stratified(table, SITE_EXITED_THREAD, n);
}
