#pragma once
// Layer profile, stage "decide": byte-weighted Poisson sampling.
//
// Sample points fall on the stream of bytes a thread allocates as a Poisson
// process of rate 1/R: the distance to the next point is exponential with
// mean R, drawn from a per-thread generator.  An object of s bytes contains
// a point with probability p(s) = 1 - exp(-s/R), so a sampled object stands
// for 1/p(s) objects and s/p(s) bytes (the dump writes these, see
// snapshot.h).  Distances are memoryless, so after a sampled object the next
// distance is drawn afresh from the object's end.
//
// Bytes are counted when a refill hands a batch to the fast free list, not
// per malloc: the fast path has no countdown.  If the batch (n objects of s
// bytes) reaches the next point, only the objects before it go to the fast
// list; the rest are held back, the first of them being the one the point
// falls in.  When the fast list runs dry, refill finds the held-back batch
// and serves that allocation as a sample (profiler.h).  Large allocations
// count down on their own slow path.

#include "settings.h"

#include <cmath>

namespace snmalloc::profile
{
  // Unbiased weight of one sampled object of `size` bytes taken at mean
  // interval R: it stands for 1 / (1 - exp(-size/R)) objects.
  inline double sample_weight(size_t size, size_t interval)
  {
    return 1.0 / -std::expm1(-double(size) / double(interval));
  }

  class Sampler
  {
    uint64_t rng_ = 0;
    uint64_t epoch_ = 0;
    size_t interval_ = 0;
    size_t bytes_until_sample_ = 0;

    uint64_t next_random()
    {
      if (SNMALLOC_UNLIKELY(rng_ == 0))
        rng_ = Pal::entropy64() | 1;
      // xorshift64*: fast, and plenty for choosing sample points.
      rng_ ^= rng_ >> 12;
      rng_ ^= rng_ << 25;
      rng_ ^= rng_ >> 27;
      return rng_ * 0x2545F4914F6CDD1DULL;
    }

  public:
    // Distance to the next sample point.  At R == 1 every byte is a point,
    // which samples every allocation (the exact mode tests rely on it).
    size_t draw()
    {
      if (interval_ <= 1)
        return 0;
      // u uniform in (0, 1]
      double u = double((next_random() >> 11) + 1) * 0x1.0p-53;
      return static_cast<size_t>(-std::log(u) * double(interval_));
    }

    // Pick up start()/stop(); false while profiling is stopped.
    bool refresh()
    {
      uint64_t e = settings.epoch.load(std::memory_order_acquire);
      if (SNMALLOC_UNLIKELY(e != epoch_))
      {
        epoch_ = e;
        interval_ = settings.interval.load(std::memory_order_relaxed);
        bytes_until_sample_ = draw();
      }
      return interval_ != 0;
    }

    size_t interval() const
    {
      return interval_;
    }

    // How many of `count` objects of `size` bytes come before the next
    // sample point; all of them when the point lies beyond the batch.  When
    // the point falls in the batch, the next distance is drawn at once.
    size_t objects_before_point(size_t count, size_t size)
    {
      if (count * size <= bytes_until_sample_)
      {
        bytes_until_sample_ -= count * size;
        return count;
      }
      size_t before = bytes_until_sample_ / size;
      bytes_until_sample_ = draw();
      return before;
    }

    // A large allocation of `size` bytes: does it contain a point?
    bool large_contains_point(size_t size)
    {
      if (size <= bytes_until_sample_)
      {
        bytes_until_sample_ -= size;
        return false;
      }
      bytes_until_sample_ = draw();
      return true;
    }
  };
} // namespace snmalloc::profile
