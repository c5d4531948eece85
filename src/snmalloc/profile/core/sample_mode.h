#pragma once
// Layer profile/core, stage "decide": the sampling modes, what the rate means in
// each, and what one sample of each stands for.
//
//   bytes      (default) sample points fall on the byte stream as a Poisson
//              process of mean interval R bytes.  An object of s bytes is
//              sampled with p = 1 - exp(-s/R): the live-heap question.
//   count      every allocation is sampled with p = 1/N whatever its size
//              (the rate is N allocations): which sites allocate most often.
//              The gaps between sampled allocations are geometric.
//   sizeclass  one sample in every N allocations of each sizeclass, on its
//              own: each sizeclass's stream is cut into blocks of N and one
//              allocation of each block, uniformly placed, is sampled.  Every
//              object still has p = 1/N, but a class with N allocations has
//              exactly one sample, so rare sizes are covered as often as
//              common ones (what guarded sampling wants), and the random
//              place in each block cannot fall in step with a program that
//              allocates in a fixed cycle.  Large allocations form strata by
//              power of two of their size.
//
// A sample stands for 1/p objects and size/p bytes (Horvitz-Thompson): the
// dump's estimates are unbiased in every mode.  In count mode a site of n
// objects has k ~ Binomial(n, 1/N) samples, so the estimate N*k has
// variance n*(N-1); in sizeclass mode the samples among the site's objects
// are a sum of independent Bernoullis, one per block, whose variance is at
// most that (each block adds q(1-q) for q = its share of the site / N,
// against the binomial's q(1 - 1/N)), and a site whose objects are
// allocated in one run has k within 2 of n/N.

#include "../../ds/ds.h"
#include "../base/float_math.h"

namespace snmalloc::profile
{
  enum class SampleMode : uint32_t
  {
    Bytes = 0,
    Count = 1,
    SizeClass = 2,
  };

  constexpr size_t DEFAULT_INTERVAL = size_t(512) * 1024;
  // One sample per 8192 allocations: on the benchmarks about as many
  // samples as 512 KiB of bytes mode takes, where objects average 64 bytes
  // (docs/profiling.md, "Sampling modes").
  constexpr size_t DEFAULT_COUNT_INTERVAL = 8192;

  // The rate a mode starts with when none is given.
  constexpr size_t default_rate(SampleMode mode)
  {
    return mode == SampleMode::Bytes ? DEFAULT_INTERVAL : DEFAULT_COUNT_INTERVAL;
  }

  inline const char* mode_name(SampleMode mode)
  {
    switch (mode)
    {
      case SampleMode::Count:
        return "count";
      case SampleMode::SizeClass:
        return "sizeclass";
      default:
        return "bytes";
    }
  }

  // The mode named by the `size` bytes at `name`; false if none is.
  inline bool parse_mode(const char* name, size_t size, SampleMode& out)
  {
    for (SampleMode m : {SampleMode::Bytes, SampleMode::Count, SampleMode::SizeClass})
    {
      const char* n = mode_name(m);
      if (__builtin_strlen(n) == size && __builtin_memcmp(n, name, size) == 0)
      {
        out = m;
        return true;
      }
    }
    return false;
  }

  // Objects one sample of `size` bytes stands for, taken in `mode` at
  // `interval` (1/p).
  inline double sample_weight(SampleMode mode, size_t size, size_t interval)
  {
    if (mode != SampleMode::Bytes)
      return double(interval);
    return 1.0 / -expm1_of(-double(size) / double(interval));
  }

  // Bytes one sample stands for, rounded down (the live-heap estimate's unit).
  inline int64_t sample_bytes(SampleMode mode, size_t size, size_t interval)
  {
    return int64_t(sample_weight(mode, size, interval) * double(size));
  }

  // The mode and rate a sample was taken with.
  struct SampleRate
  {
    SampleMode mode;
    size_t interval;
  };
} // namespace snmalloc::profile
