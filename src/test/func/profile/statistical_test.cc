// Statistical accuracy at one sampling interval R (its setting, "R TARGET":
// support/profiling.h; ctest runs it at two).  The program holds known live
// bytes at distinct sites, in the shapes that stress the sampler
// (support/statistical.h): tiny objects, page-sized ones, blocks larger
// than R, objects allocated by four threads, objects kept after their
// thread exited; and objects that must not show: freed by another thread,
// and churn freed before the dump.
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
#include "support/statistical.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <string>

using namespace snmalloc_test;
using namespace snmalloc_test::statistical;

namespace
{
  const size_t R = test_setting_number(0);
  const double TARGET = double(test_setting_number(1));

  // The medium and large sizes, a sizeclass size and a power of two, so
  // each object's usable size is exactly its request.
  constexpr size_t PAGE = 4096, LARGE = size_t(1) << 20;

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

  // A sampled object stands for 1/p objects: variance (1-p)/p per object.
  double variance_per_object(size_t size)
  {
    double p = sample_probability(size);
    return (1 - p) / p;
  }

  const Estimator estimator{variance_per_object, 0, "R " + std::to_string(R)};
} // namespace

TEST_CASE("statistical accuracy of every site's estimate")
{
  require_test_setting();
  const Counts n{
    objects_for(TINY),
    objects_for(PAGE),
    objects_for(LARGE),
    objects_for(THREADS_SIZE) / THREADS * THREADS,
    objects_for(EXITED_SIZE),
    objects_for(REMOTE_SIZE),
    CHURN_FACTOR * objects_for(CHURN_SIZE)};
  Sites sites(PAGE, LARGE, n);
  sites.check_usable_sizes();

  TempDir dir;
  {
    ProfilingAt sampling(R);
    sites.run();
    dump_or_fail(dir.file("statistical.pb.gz"));
  }

  SiteTable table(dir.file("statistical.pb.gz"));
  check_live(table, SITE_TINY, n.tiny, TINY, estimator);
  check_live(table, SITE_MEDIUM, n.medium, PAGE, estimator);
  check_live(table, SITE_LARGE, n.large, LARGE, estimator);
  check_live(table, SITE_THREADS, n.threads, THREADS_SIZE, estimator);
  check_live(table, SITE_EXITED_THREAD, n.exited, EXITED_SIZE, estimator);
  check_gone(table, SITE_FREED_REMOTELY, n.remote, REMOTE_SIZE, estimator);
  check_gone(table, SITE_CHURN, n.churn, CHURN_SIZE, estimator);
}
