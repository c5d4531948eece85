#pragma once
// Layer ds_core: power-of-two arithmetic.

#include "defines.h"

namespace snmalloc::bits
{
  constexpr size_t BITS = sizeof(size_t) * 8;

  constexpr size_t log2_floor(size_t x)
  {
    return BITS - 1 - static_cast<size_t>(__builtin_clzl(x));
  }

  // Smallest k with 2^k >= x; x must be at least 1.
  constexpr size_t log2_ceil(size_t x)
  {
    return x <= 1 ? 0 : log2_floor(x - 1) + 1;
  }

  constexpr size_t next_pow2(size_t x)
  {
    return size_t(1) << log2_ceil(x);
  }

  constexpr bool is_pow2(size_t x)
  {
    return x != 0 && (x & (x - 1)) == 0;
  }

  constexpr size_t align_up(size_t x, size_t alignment)
  {
    return (x + alignment - 1) & ~(alignment - 1);
  }

  // x rotated right by n bits, 0 < n < BITS (one instruction on x86-64).
  constexpr size_t rotate_right(size_t x, size_t n)
  {
    return (x >> n) | (x << (BITS - n));
  }

  // Largest power of two dividing x (x > 0): the alignment of x-strided objects.
  constexpr size_t natural_alignment(size_t x)
  {
    return x & (~x + 1);
  }
} // namespace snmalloc::bits
