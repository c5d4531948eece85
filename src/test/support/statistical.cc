#include "support/statistical.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <malloc.h>
#include <thread>

using snmalloc_test::Node;
using snmalloc_test::allocate_chain;
using snmalloc_test::free_chain;

// The sites: real frames, named in the profile (statistical.h).
__attribute__((noinline)) Node* stat_site_tiny(size_t n)
{
  return allocate_chain(snmalloc_test::statistical::TINY, n);
}

__attribute__((noinline)) Node* stat_site_medium(size_t size, size_t n)
{
  return allocate_chain(size, n);
}

// Large blocks are not written: they cost address space, not resident
// memory.
__attribute__((noinline)) void stat_site_large(std::vector<void*>& blocks, size_t size, size_t n)
{
  for (size_t i = 0; i < n; i++)
    blocks.push_back(std::malloc(size));
}

__attribute__((noinline)) Node* stat_site_threads(size_t n)
{
  return allocate_chain(snmalloc_test::statistical::THREADS_SIZE, n);
}

__attribute__((noinline)) Node* stat_site_exited_thread(size_t n)
{
  return allocate_chain(snmalloc_test::statistical::EXITED_SIZE, n);
}

__attribute__((noinline)) Node* stat_site_freed_remotely(size_t n)
{
  return allocate_chain(snmalloc_test::statistical::REMOTE_SIZE, n);
}

__attribute__((noinline)) void stat_site_churn(size_t n)
{
  constexpr size_t BATCH = 1000;
  for (size_t done = 0; done < n; done += BATCH)
    free_chain(allocate_chain(snmalloc_test::statistical::CHURN_SIZE, std::min(BATCH, n - done)));
}

namespace snmalloc_test::statistical
{
  Sites::Sites(size_t medium, size_t large, const Counts& counts)
  : medium_(medium), large_(large), counts_(counts)
  {
    large_blocks_.reserve(counts.large);
  }

  void Sites::check_usable_sizes() const
  {
    for (size_t size : {TINY, medium_, large_, THREADS_SIZE, EXITED_SIZE, REMOTE_SIZE, CHURN_SIZE})
    {
      void* p = std::malloc(size);
      REQUIRE(malloc_usable_size(p) == size);
      std::free(p);
    }
  }

  void Sites::run()
  {
    Node* remote = nullptr;
    on_fresh_thread([&] {
      tiny_ = stat_site_tiny(counts_.tiny);
      medium_chain_ = stat_site_medium(medium_, counts_.medium);
      stat_site_large(large_blocks_, large_, counts_.large);
      stat_site_churn(counts_.churn);
    });
    std::vector<std::thread> threads;
    for (size_t t = 0; t < THREADS; t++)
      threads.emplace_back([&, t] { by_thread_[t] = stat_site_threads(counts_.threads / THREADS); });
    for (std::thread& t : threads)
      t.join();
    // This thread exits; its objects stay live.
    on_fresh_thread([&] { exited_ = stat_site_exited_thread(counts_.exited); });
    // Allocated on one thread, freed on another.
    on_fresh_thread([&] { remote = stat_site_freed_remotely(counts_.remote); });
    on_fresh_thread([&] { free_chain(remote); });
  }

  Sites::~Sites()
  {
    free_chain(tiny_);
    free_chain(medium_chain_);
    free_chain(exited_);
    for (Node* chain : by_thread_)
      free_chain(chain);
    for (void* p : large_blocks_)
      std::free(p);
  }

  void check_estimate(
    const char* what,
    int64_t estimate,
    size_t n,
    size_t size,
    bool bytes,
    const Estimator& estimator)
  {
    double unit = bytes ? double(size) : 1.0;
    double truth = double(n) * unit;
    double sd = unit * std::sqrt(double(n) * estimator.variance_per_object(size));
    double allowed = SIGMAS * sd + unit;
    INFO(what << ": estimate " << estimate << ", truth " << truth << ", allowed +-" << allowed
              << " (" << n << " objects of " << size << " B, " << estimator.description << ")");
    CHECK(std::fabs(double(estimate) - truth) <= allowed);
    if (estimator.objects_per_sample != 0)
    {
      // Every sample stands for exactly objects_per_sample objects.
      CHECK(estimate % int64_t(estimator.objects_per_sample * (bytes ? size : 1)) == 0);
    }
  }

  void check_live(
    const SiteTable& table, const char* site, size_t n, size_t size, const Estimator& estimator)
  {
    SiteValues v = table[site];
    INFO("site " << site);
    check_estimate("inuse_space", v.inuse_space, n, size, true, estimator);
    check_estimate("inuse_objects", v.inuse_objects, n, size, false, estimator);
  }

  void check_gone(
    const SiteTable& table,
    const char* site,
    size_t n,
    size_t size,
    const Estimator& estimator,
    bool objects_too)
  {
    SiteValues v = table[site];
    INFO("site " << site);
    CHECK(v.inuse_space == 0);
    CHECK(v.inuse_objects == 0);
    check_estimate("alloc_space", v.alloc_space, n, size, true, estimator);
    if (objects_too)
      check_estimate("alloc_objects", v.alloc_objects, n, size, false, estimator);
  }
} // namespace snmalloc_test::statistical
