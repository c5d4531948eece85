// profile/core/sampler.h in bytes mode: large objects through the inline
// count and the exact one, as Profiler::CoreState::alloc_large takes them.
// Sample points are a Poisson process of rate 1/R on the byte stream, so
// an object of s bytes holds one with probability p = 1 - exp(-s/R),
// independently of the others, and between two sampled objects of R/64
// bytes lie a geometric number of unsampled ones, 64 or more (R bytes)
// with probability (1 - p)^64 = exp(-1).
//
// Tolerance: 5 standard deviations of a binomial count (or fraction); the
// generator is seeded from the OS, so each run is a new draw.  A
// two-sided 5-sigma deviation has probability about 6e-7, and a run makes
// five checks: a false failure about once in 300,000 runs.
#include <snmalloc/profile/core/sampler.h>

#include <catch2/catch.hpp>
#include <cmath>

using namespace snmalloc::profile;

namespace
{
  constexpr size_t R = 524288;

  // A sampler counting by bytes at interval R.
  void start_bytes(Sampler& sampler)
  {
    settings.interval.store(R);
    settings.mode.store(SampleMode::Bytes);
    settings.epoch.fetch_add(1);
    REQUIRE(sampler.refresh());
  }

  bool large_sampled(Sampler& sampler, size_t size)
  {
    if (sampler.large_before_point(size))
      return false;
    sampler.uncount_large(size);
    return sampler.large_contains_point(size);
  }

  bool within_five_sigma(double count, double n, double p)
  {
    double sigma = std::sqrt(n * p * (1 - p));
    return std::fabs(count - n * p) <= 5 * sigma;
  }
} // namespace

TEST_CASE("a large object of s bytes is sampled with probability 1 - exp(-s/R)")
{
  Sampler sampler;
  start_bytes(sampler);
  for (size_t size : {R / 64, R / 4, R, 4 * R})
  {
    constexpr size_t N = 400000;
    size_t sampled = 0;
    for (size_t i = 0; i < N; i++)
      sampled += large_sampled(sampler, size) ? 1 : 0;
    double p = -std::expm1(-double(size) / double(R));
    INFO("size " << size << ": " << sampled << " of " << N << ", expected " << N * p);
    CHECK(within_five_sigma(double(sampled), double(N), p));
  }
}

TEST_CASE("the objects between sampled ones are as many as a Poisson process leaves")
{
  Sampler sampler;
  start_bytes(sampler);
  constexpr size_t SIZE = R / 64;
  size_t gaps = 0, long_gaps = 0, run = 0;
  for (size_t i = 0; i < 2000000; i++)
  {
    if (!large_sampled(sampler, SIZE))
    {
      run++;
      continue;
    }
    if (i != run) // not the first point: the run before it is a whole gap
    {
      gaps++;
      long_gaps += run >= 64 ? 1 : 0;
    }
    run = 0;
  }
  double p = std::exp(-1.0);
  INFO(long_gaps << " of " << gaps << " gaps of 64 objects or more, expected " << gaps * p);
  CHECK(within_five_sigma(double(long_gaps), double(gaps), p));
}
