// The heap census (snmalloc_heap_walk) against the sampled heap profile,
// per sizeclass: the census counts the live objects of each class
// exactly; the profile estimates them from samples.  The estimate must be
// within its statistical bounds of the census's count.
//
// Four threads, each started while profiling (so no object comes from a
// free list filled before), allocate objects of five small classes and a
// large size, shuffled; another thread frees a third of them, chosen at
// random.  The census before profiling is subtracted, so each class's
// truth is the objects the threads left live.
//
// Tolerance, as in statistical_test.cc: an object of s bytes is sampled
// with probability p = 1 - exp(-s/R) and counts s/p bytes; for n live
// objects the bytes estimate has variance n * s^2 * (1-p)/p.  Each class
// is allocated so that about TARGET = 400 of its live objects are sampled
// (a relative standard deviation of 5%); a check allows 5 standard
// deviations.  Six classes, each checked once: a false failure about once
// in 100,000 runs.
#include "support/files.h"
#include "support/pprof_output.h"
#include "support/profiling.h"
#include "support/statistical.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <random>
#include <snmalloc/snmalloc.h>
#include <snmalloc/snmalloc_stats.h>
#include <thread>
#include <vector>

using namespace snmalloc_test;
using namespace snmalloc_test::statistical;

namespace
{
  constexpr size_t R = 64 * 1024;
  constexpr double TARGET = 400;
  // Requests whose usable sizes are five classes and a large run.
  constexpr size_t REQUESTS[] = {40, 300, 1500, 5000, 14000, 200 * 1024};
  constexpr size_t KINDS = sizeof(REQUESTS) / sizeof(REQUESTS[0]);

  double sample_probability(size_t size)
  {
    return -std::expm1(-double(size) / double(R));
  }

  double variance_per_object(size_t size)
  {
    double p = sample_probability(size);
    return (1 - p) / p;
  }

  // Objects to allocate of `size` so that TARGET of the two thirds left
  // live are sampled on average.
  size_t objects_for(size_t size)
  {
    double p = sample_probability(size);
    return std::max<size_t>(64, size_t(std::ceil(1.5 * TARGET * (1 - p) / p)));
  }

  // Live objects per kind, by usable size, from one census.  Allocates
  // nothing, as the census's visitor must not.
  struct CensusCounts
  {
    size_t usable[KINDS];
    int64_t objects[KINDS] = {};

    explicit CensusCounts(const size_t (&sizes)[KINDS])
    {
      std::copy(sizes, sizes + KINDS, usable);
      snmalloc_heap_walk(
        [](void*, size_t size, void* arg) {
          auto* self = static_cast<CensusCounts*>(arg);
          for (size_t k = 0; k < KINDS; k++)
          {
            if (self->usable[k] == size)
              self->objects[k]++;
          }
        },
        this);
    }
  };
} // namespace

TEST_CASE("the census per sizeclass and the sampled profile's estimate agree")
{
  size_t usable[KINDS];
  for (size_t k = 0; k < KINDS; k++)
    usable[k] = usable_size_unsampled(REQUESTS[k]);
  // Each kind's size must be one the others do not share.
  for (size_t k = 1; k < KINDS; k++)
    REQUIRE(usable[k] > usable[k - 1]);

  // Every object, tagged with its kind, dealt out to the threads in a
  // random order (reserved now: nothing of the test's own is allocated
  // while profiling but the objects).
  std::vector<uint8_t> order;
  for (size_t k = 0; k < KINDS; k++)
    order.insert(order.end(), objects_for(usable[k]), uint8_t(k));
  std::mt19937_64 rng(20261203);
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<void*> objects(order.size());
  std::vector<size_t> freed_order(order.size());
  for (size_t i = 0; i < freed_order.size(); i++)
    freed_order[i] = i;
  std::shuffle(freed_order.begin(), freed_order.end(), rng);
  freed_order.resize(order.size() / 3);
  std::vector<std::thread> threads;
  threads.reserve(THREADS);

  CensusCounts before(usable);
  TempDir dir;
  {
    ProfilingAt sampling(R);
    for (size_t t = 0; t < THREADS; t++)
    {
      threads.emplace_back([&, t] {
        for (size_t i = t; i < order.size(); i += THREADS)
          objects[i] = std::malloc(REQUESTS[order[i]]);
      });
    }
    for (std::thread& t : threads)
      t.join();
    // A third freed by another thread than the one that allocated each.
    on_fresh_thread([&] {
      for (size_t i : freed_order)
      {
        std::free(objects[i]);
        objects[i] = nullptr;
      }
    });
    dump_or_fail(dir.file("census.pb.gz"));
  }
  CensusCounts after(usable);

  int64_t estimate[KINDS] = {};
  for (const RawSample& s : read_raw(dir.file("census.pb.gz")).samples)
  {
    REQUIRE(s.values.size() == 4);
    REQUIRE(s.bytes_labels.size() == 1);
    for (size_t k = 0; k < KINDS; k++)
    {
      if (s.bytes_labels[0] == int64_t(usable[k]))
        estimate[k] += s.values[3]; // inuse_space
    }
  }
  const Estimator estimator{variance_per_object, 0, "R " + std::to_string(R)};
  for (size_t k = 0; k < KINDS; k++)
  {
    size_t held = 0;
    for (size_t i = 0; i < order.size(); i++)
      held += order[i] == k && objects[i] != nullptr;
    int64_t census = after.objects[k] - before.objects[k];
    INFO("objects of " << usable[k] << " B: census " << census << ", held " << held);
    // The census counts what the test holds, and at most the few objects
    // of the class the test's own strings and threads left in between.
    CHECK(census >= int64_t(held));
    CHECK(census <= int64_t(held) + 8);
    check_estimate("inuse_space against the census", estimate[k], size_t(census), usable[k], true, estimator);
  }
  for (void* p : objects)
    std::free(p);
}
