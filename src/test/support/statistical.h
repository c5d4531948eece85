// Shared by the statistical tests of the profiler (func/profile/
// statistical_test.cc for the byte interval, mode_statistical_test.cc for
// the count and sizeclass modes): sites holding known live objects in the
// shapes that stress the sampler, and the check of a site's estimate
// against the truth.
//
// The sites: tiny objects, medium ones, large ones (each test picks the
// medium and large sizes), objects allocated by four threads, objects kept
// after their thread exited; and objects that must not show as live: freed
// by another thread, and churn freed before the dump.  Their functions are
// named stat_site_* (statistical.cc) and must be real frames: this file is
// built with the flags of the profile tests' own sources.
#pragma once

#include "support/pprof_output.h"
#include "support/profiling.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace snmalloc_test::statistical
{
  // Each a sizeclass size, so each object's usable size is exactly its
  // request.
  constexpr size_t TINY = 32, THREADS_SIZE = 256, EXITED_SIZE = 128;
  constexpr size_t REMOTE_SIZE = 512, CHURN_SIZE = 96;
  constexpr size_t THREADS = 4;
  constexpr size_t CHURN_FACTOR = 4; // churn allocates 4 sites' worth

  // The sites' function names, as pprof shows them.
  constexpr const char* SITE_TINY = "stat_site_tiny";
  constexpr const char* SITE_MEDIUM = "stat_site_medium";
  constexpr const char* SITE_LARGE = "stat_site_large";
  constexpr const char* SITE_THREADS = "stat_site_threads";
  constexpr const char* SITE_EXITED_THREAD = "stat_site_exited_thread";
  constexpr const char* SITE_FREED_REMOTELY = "stat_site_freed_remotely";
  constexpr const char* SITE_CHURN = "stat_site_churn";

  // Objects each site allocates.  `threads` is a multiple of THREADS.
  struct Counts
  {
    size_t tiny, medium, large, threads, exited, remote, churn;
  };

  // The objects the sites hold, freed when this goes.
  class Sites
  {
  public:
    // `medium` a sizeclass size, `large` a size whose usable size is
    // exactly itself.  Allocates nothing that profiling should see: call
    // before profiling starts.
    Sites(size_t medium, size_t large, const Counts& counts);
    ~Sites();
    Sites(const Sites&) = delete;
    Sites& operator=(const Sites&) = delete;

    // Fails the test unless every site's object size is its usable size.
    void check_usable_sizes() const;

    // Runs every site, each on a thread started now, so no object comes
    // from a free list filled before sampling began.  Call while
    // profiling, once.
    void run();

  private:
    size_t medium_, large_;
    Counts counts_;
    Node *tiny_ = nullptr, *medium_chain_ = nullptr, *exited_ = nullptr;
    Node* by_thread_[THREADS] = {};
    std::vector<void*> large_blocks_;
  };

  // How an estimate spreads: a site of n objects of `size` bytes has an
  // objects estimate of variance n * variance_per_object(size), and its
  // bytes estimate is that times size.
  struct Estimator
  {
    double (*variance_per_object)(size_t size);
    // When each sample stands for exactly this many objects (the count
    // and sizeclass modes): every estimate is a multiple of it.  0 if not.
    size_t objects_per_sample;
    // Says which sampling this is in failure messages.
    std::string description;
  };

  // A check allows this many standard deviations, plus one object's worth
  // for pprof's rounding of each value to an integer.
  constexpr double SIGMAS = 5;

  // |estimate - truth| within SIGMAS standard deviations plus one object.
  void check_estimate(
    const char* what,
    int64_t estimate,
    size_t n,
    size_t size,
    bool bytes,
    const Estimator& estimator);

  // A site whose n objects of `size` bytes are live at the dump: its
  // inuse_space and inuse_objects estimates.
  void check_live(
    const SiteTable& table, const char* site, size_t n, size_t size, const Estimator& estimator);

  // A site whose n objects were freed before the dump: nothing live, but
  // the allocations are counted (alloc_space; alloc_objects too when
  // `objects_too`).
  void check_gone(
    const SiteTable& table,
    const char* site,
    size_t n,
    size_t size,
    const Estimator& estimator,
    bool objects_too = false);
} // namespace snmalloc_test::statistical
