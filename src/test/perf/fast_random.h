// A small, fast PRNG (xorshift64*) so that choosing sizes and slots costs
// little next to the allocator calls being measured, and every run of a
// workload makes the same sequence of requests.
#pragma once

#include <cstddef>
#include <cstdint>

namespace bench
{
  class FastRandom
  {
    uint64_t state_;

  public:
    explicit FastRandom(uint64_t seed) : state_(seed * 0x9E3779B97F4A7C15ULL | 1) {}

    uint64_t next()
    {
      state_ ^= state_ >> 12;
      state_ ^= state_ << 25;
      state_ ^= state_ >> 27;
      return state_ * 0x2545F4914F6CDD1DULL;
    }

    // Uniform in [0, bound); the multiply-shift bias is negligible here.
    size_t below(size_t bound)
    {
      return static_cast<size_t>((static_cast<unsigned __int128>(next() >> 11) * bound) >> 53);
    }

    // Uniform in [low, high].
    size_t between(size_t low, size_t high)
    {
      return low + below(high - low + 1);
    }
  };
} // namespace bench
