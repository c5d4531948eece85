#pragma once
// Layer profile/core, stage "decide": where the next sample falls, in each of
// the modes of sample_mode.h.
//
// bytes: sample points fall on the stream of bytes a thread allocates as a
// Poisson process of rate 1/R: the distance to the next point is
// exponential with mean R, drawn from a per-thread generator.  An object of
// s bytes contains a point with probability p(s) = 1 - exp(-s/R).
// Distances are memoryless, so after a sampled object the next distance is
// drawn afresh from the object's end.
// count: the same countdown over allocations instead of bytes, each object
// one unit; the number of unsampled allocations before the next sampled
// one is geometric with p = 1/N, so each allocation is sampled with p.
// sizeclass: one countdown per sizeclass (and per power of two of large
// sizes), running through blocks of N allocations with one sampled
// allocation at a uniform place in each.
//
// Units are counted when a refill hands a batch to the fast free list, not
// per malloc: the fast path has no countdown.  If the batch (n objects of s
// bytes) reaches the next point, only the objects before it go to the fast
// list; the rest are held back, the first of them being the one the point
// falls in.  When the fast list runs dry, refill finds the held-back batch
// and serves that allocation as a sample (profiler.h).  Large allocations
// count down on their own slow path, a batch of one.

#include "../base/float_math.h"
#include "settings.h"

namespace snmalloc::profile
{
  class Sampler
  {
    // A countdown: units (bytes or allocations) before the next sample
    // point; in sizeclass mode also the allocations left in the current
    // block after its sampled one.
    struct Countdown
    {
      size_t until = 0;
      size_t rest_of_block = 0;
    };

    // Strata of sizeclass mode: the small classes, then large sizes by
    // the bit length of their size (65 KiB .. 2^63).
    static constexpr size_t LARGE_STRATA = bits::BITS - bits::log2_floor(config::MAX_SMALL_SIZE);
    static constexpr size_t STRATA = NUM_SMALL_CLASSES + LARGE_STRATA;

    uint64_t rng_ = 0;
    uint64_t epoch_ = 0;
    size_t interval_ = 0;
    SampleMode mode_ = SampleMode::Bytes;
    // Bytes and count modes: one countdown for every class, which a refill
    // counts its batch on inline (units_before_point) in the class's units
    // (unit_: its size in bytes mode, 1 an object in the others; count mode
    // on the slow path at every refill would cost +8.4% instructions on
    // perf-random-replace).  Zero in sizeclass mode, whose countdowns are
    // per class, so that every batch reaches the slow path; while stopped,
    // so large that no batch does (at zero, a shim loaded with profiling
    // off would call the slow path at every refill: +7.6% instructions on
    // perf-random-replace).  A start() is seen first by sample_due, whose
    // refresh draws it anew.
    Countdown shared_;
    uint32_t unit_[NUM_SMALL_CLASSES] = {};
    Countdown strata_[STRATA]; // sizeclass mode

    // Out of line, so that draw() saves no registers for its call.
    SNMALLOC_SLOW_PATH void seed()
    {
      rng_ = Pal::entropy64() | 1;
    }

    uint64_t next_random()
    {
      if (SNMALLOC_UNLIKELY(rng_ == 0))
        seed();
      // xorshift64*: fast, and plenty for choosing sample points.
      rng_ ^= rng_ >> 12;
      rng_ ^= rng_ << 25;
      rng_ ^= rng_ >> 27;
      return rng_ * 0x2545F4914F6CDD1DULL;
    }

    // Uniform in (0, 1].
    double uniform_open()
    {
      return double((next_random() >> 11) + 1) * 0x1.0p-53;
    }

    // Uniform in [0, n), n < 2^64.
    size_t uniform_below(size_t n)
    {
      return size_t((unsigned __int128)next_random() * n >> 64);
    }

    // The units to the next point after one (or after the start).  At
    // interval 1 every unit is a point, so every allocation is sampled (the
    // exact tests rely on it).
    void draw(Countdown& c)
    {
      if (interval_ <= 1)
      {
        c.until = 0;
        return;
      }
      switch (mode_)
      {
        case SampleMode::Bytes:
          c.until = size_t(-log_of(uniform_open()) * double(interval_));
          return;
        case SampleMode::Count:
          // Failures before a success of probability 1/N.
          c.until = size_t(log_of(uniform_open()) / log1p_of(-1.0 / double(interval_)));
          return;
        case SampleMode::SizeClass:
        {
          size_t place = uniform_below(interval_);
          c.until = c.rest_of_block + place;
          c.rest_of_block = interval_ - 1 - place;
          return;
        }
      }
    }

    // What a large object of `size` bytes counts for in the mode.
    size_t large_units(size_t size) const
    {
      return mode_ == SampleMode::Bytes ? size : 1;
    }

    size_t large_stratum(size_t size) const
    {
      size_t s = NUM_SMALL_CLASSES + bits::log2_floor(size) - bits::log2_floor(config::MAX_SMALL_SIZE);
      return s < STRATA ? s : STRATA - 1;
    }

    Countdown& countdown_of(size_t stratum)
    {
      switch (mode_)
      {
        case SampleMode::Bytes:
        case SampleMode::Count:
          return shared_;
        case SampleMode::SizeClass:
          break;
      }
      return strata_[stratum];
    }

    // How many of `count` objects of `unit` units come before c's point;
    // all of them when the point lies beyond them.  When the point falls
    // among them, the next one is drawn at once.
    size_t before_point(Countdown& c, size_t count, size_t unit)
    {
      if (count * unit <= c.until)
      {
        c.until -= count * unit;
        return count;
      }
      size_t before = c.until / unit;
      draw(c);
      return before;
    }

    // Count `units` on the shared countdown, inline: true while the next
    // sample point still lies beyond them (or profiling is stopped).
    SNMALLOC_FAST_PATH bool shared_before_point(size_t units)
    {
      shared_.until -= units;
      return SNMALLOC_LIKELY(ptrdiff_t(shared_.until) >= 0);
    }

  public:
    // Pick up start()/stop(); false while profiling is stopped.
    bool refresh()
    {
      uint64_t e = settings.epoch.load(std::memory_order_acquire);
      if (SNMALLOC_UNLIKELY(e != epoch_))
      {
        epoch_ = e;
        // Seeded afresh at its next draw: a fork child (whose epoch
        // Profiler::postfork_child moves) would otherwise draw its parent's
        // sample points, as would every worker forked from one server.
        rng_ = 0;
        interval_ = settings.interval.load(std::memory_order_relaxed);
        mode_ = settings.mode.load(std::memory_order_relaxed);
        shared_ = {};
        for (sizeclass_t c = 0; c < NUM_SMALL_CLASSES; c++)
          unit_[c] = mode_ == SampleMode::Bytes ? uint32_t(sizeclass_to_size(c)) : 1;
        if (interval_ == 0)
          shared_.until = size_t(PTRDIFF_MAX); // stopped: batches count inline
        else if (mode_ != SampleMode::SizeClass)
          draw(shared_);
        else
        {
          for (Countdown& c : strata_)
          {
            c = {};
            draw(c);
          }
        }
      }
      return interval_ != 0;
    }

    // The settings this sampler counts by (see refresh).
    uint64_t epoch() const
    {
      return epoch_;
    }

    SampleRate rate() const
    {
      return {mode_, interval_};
    }

    // A refill's common case, inline: a batch of `count` objects of class
    // `sc` that lies wholly before the next sample point is counted: a
    // multiply, a subtract and a branch on the sign; while stopped, too.
    // False for every other case (sizeclass mode, the batch reaches the
    // point, or a countdown of 2^63 or more at an absurd rate); the caller
    // then gives the units back (uncount) and objects_before_point counts
    // exactly.
    SNMALLOC_FAST_PATH bool units_before_point(sizeclass_t sc, size_t count)
    {
      return shared_before_point(count * unit_[sc]);
    }

    void uncount(sizeclass_t sc, size_t count)
    {
      shared_.until += count * unit_[sc];
    }

    // How many of `count` objects of sizeclass `sc` come before the next
    // sample point; all of them when the point lies beyond the batch.
    size_t objects_before_point(sizeclass_t sc, size_t count)
    {
      return before_point(countdown_of(sc), count, unit_[sc]);
    }

    // A large allocation's common case, inline as units_before_point: an
    // object of `size` bytes that lies wholly before the next sample point
    // is counted.  False for every other case; the caller then gives the
    // units back (uncount_large) and large_contains_point counts exactly.
    SNMALLOC_FAST_PATH bool large_before_point(size_t size)
    {
      return shared_before_point(large_units(size));
    }

    void uncount_large(size_t size)
    {
      shared_.until += large_units(size);
    }

    // A large allocation of `size` bytes: is it sampled?
    bool large_contains_point(size_t size)
    {
      return before_point(countdown_of(large_stratum(size)), 1, large_units(size)) == 0;
    }

    // A large run grew in place by `added` bytes: do they hold a point?
    // Only bytes are counted so: in the other modes a growth is no
    // allocation.
    bool growth_contains_point(size_t added)
    {
      return mode_ == SampleMode::Bytes && before_point(shared_, 1, added) == 0;
    }
  };
} // namespace snmalloc::profile
