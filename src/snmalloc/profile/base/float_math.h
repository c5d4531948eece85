#pragma once
// Layer profile/base: the functions of libm the profiler needs, the sampler's
// logarithms and exponential and the dump's rounding, written here
// so that a program under the profiling shim does not map and relocate
// libm for them (C programs do not load it otherwise).  Each is within an
// ulp or two of libm's over the arguments the profiler passes (the test
// unit-float-math compares them); none sets errno.

#include <cstdint>
#include <cstring>

namespace snmalloc::profile
{
  namespace float_math_detail
  {
    // ln 2 split so that k * LN2_HIGH is exact for |k| < 2^11.
    constexpr double LN2_HIGH = 6.93147180369123816490e-01;
    constexpr double LN2_LOW = 1.90821492927058770002e-10;
    constexpr double INV_LN2 = 1.44269504088896338700e+00;

    inline uint64_t bits_of(double x)
    {
      uint64_t b;
      std::memcpy(&b, &x, sizeof(b));
      return b;
    }

    inline double double_of(uint64_t b)
    {
      double x;
      std::memcpy(&x, &b, sizeof(x));
      return x;
    }

    // 1 / n! for n = 1 .. 17, the Taylor coefficients of e^r - 1.
    constexpr double INV_FACTORIAL[17] = {
      1.0,
      1.0 / 2,
      1.0 / 6,
      1.0 / 24,
      1.0 / 120,
      1.0 / 720,
      1.0 / 5040,
      1.0 / 40320,
      1.0 / 362880,
      1.0 / 3628800,
      1.0 / 39916800,
      1.0 / 479001600,
      1.0 / 6227020800,
      1.0 / 87178291200,
      1.0 / 1307674368000,
      1.0 / 20922789888000,
      1.0 / 355687428096000};

    // The Taylor terms of e^r - 1 to r^N / N!, by Horner's rule on the
    // coefficients 1 / n!, not a quotient r / n a term: that would be 14
    // divisions a call, twice a sample.
    template<int N>
    inline double expm1_terms(double r)
    {
      double sum = INV_FACTORIAL[N - 1];
      for (int n = N - 2; n >= 0; n--)
        sum = sum * r + INV_FACTORIAL[n];
      return sum * r;
    }

    // e^r - 1 for |r| <= 0.5: the terms left out are below 2^-60 of the
    // result, to r^17 / 17! in all, and to r^9 / 9! for |r| < 1/32 (a
    // sample's weight for an object under R / 32: nearly every one).
    inline double expm1_small(double r)
    {
      if (r > -0.03125 && r < 0.03125)
        return expm1_terms<9>(r);
      return expm1_terms<17>(r);
    }

    // A value in two parts whose sum is nearer the real value than
    // `high` alone can be (the table's entries).
    struct TwoPart
    {
      double high;
      double low;
    };

    constexpr long double LN2_LONG = 0.693147180559945309417232121458176568L;

    constexpr TwoPart two_part(long double v)
    {
      double high = double(v);
      return {high, double(v - high)};
    }

    // The table is computed by the compiler in long double (64 bits of
    // mantissa, or 113), by the series run until its terms vanish.
    constexpr long double exp_long(long double x)
    {
      long double sum = 1, term = 1;
      for (int n = 1; n < 40; n++)
      {
        term *= x / n;
        sum += term;
      }
      return sum;
    }

    // 2^(j/32), j = 0 .. 31: e^x = 2^k 2^(j/32) e^r leaves |r| <= ln(2)/64,
    // where 7 Taylor terms are exact to 2^-60 (17 for |r| <= ln(2)/2).
    constexpr int EXP2_STEPS = 32;
    struct Exp2Table
    {
      TwoPart entry[EXP2_STEPS] = {};
      constexpr Exp2Table()
      {
        for (int j = 0; j < EXP2_STEPS; j++)
          entry[j] = two_part(exp_long(LN2_LONG * j / EXP2_STEPS));
      }
    };
    constexpr Exp2Table EXP2_TABLE{};
  } // namespace float_math_detail

  // Natural logarithm of a positive, normal, finite x (the sampler's
  // uniform draw in (0, 1]).
  inline double log_of(double x)
  {
    using namespace float_math_detail;
    uint64_t b = bits_of(x);
    int64_t exponent = int64_t(b >> 52) - 1023;
    // x = m * 2^exponent with m in [sqrt(1/2), sqrt(2)).
    double m = double_of((b & ((uint64_t(1) << 52) - 1)) | (uint64_t(1023) << 52));
    if (m > 1.41421356237309504880)
    {
      m *= 0.5;
      exponent++;
    }
    // log(m) = 2 atanh(s), s = (m - 1) / (m + 1), |s| < 0.172: the series
    // to s^25 is below 2^-60 of the result.
    double s = (m - 1) / (m + 1);
    double s2 = s * s;
    double series = 0;
    for (int k = 25; k >= 3; k -= 2)
      series = s2 * (1.0 / k + series);
    double log_m = 2 * s + 2 * s * series;
    double e = double(exponent);
    return e * LN2_HIGH + (e * LN2_LOW + log_m);
  }

  // log(1 + x) for x in (-1, 1) without the loss of log_of(1 + x) for
  // small x (count mode's log(1 - 1/N)): 1 + x rounded is u, exactly
  // 1 + (u - 1), and log(u) / (u - 1) varies slowly enough that x times it
  // is within a few ulps (Goldberg's method).
  inline double log1p_of(double x)
  {
    double u = 1 + x;
    if (u == 1)
      return x;
    return log_of(u) * (x / (u - 1));
  }

  // e^x - 1 without the cancellation of exp(x) - 1 for small x.  For the
  // sample weights: x <= 0, and any x below 708 in magnitude.
  inline double expm1_of(double x)
  {
    using namespace float_math_detail;
    if (x > -0.5 && x < 0.5)
      return expm1_small(x);
    if (x < -708)
      return -1.0;
    if (x > 708)
      return double_of(uint64_t(0x7ff) << 52); // +infinity
    // e^x = 2^(n/32) e^r with |r| <= ln(2) / 64, 2^(n/32) = 2^k 2^(j/32);
    // n ln(2)/32's high part is exact (|n| < 2^21).
    double n = double(int64_t(x * (EXP2_STEPS * INV_LN2) + (x < 0 ? -0.5 : 0.5)));
    double r = (x - n * (LN2_HIGH / EXP2_STEPS)) - n * (LN2_LOW / EXP2_STEPS);
    int64_t j = int64_t(n) & (EXP2_STEPS - 1);
    int64_t k = (int64_t(n) - j) / EXP2_STEPS;
    double scale = double_of(uint64_t(k + 1023) << 52);
    const TwoPart& step = EXP2_TABLE.entry[j];
    double high = scale * step.high;
    // high - 1 is exact where e^x is near 1 (k is 0 or -1), so nothing
    // cancels but that.
    return (high - 1) + (scale * step.low + high * expm1_terms<7>(r));
  }

  // The nearest integer, halves away from zero (llround), for |x| < 2^63.
  inline int64_t round_of(double x)
  {
    if (x >= 0x1p52 || x <= -0x1p52)
      return int64_t(x); // already an integer
    int64_t whole = int64_t(x); // toward zero; x - whole is exact
    double rest = x - double(whole);
    if (rest >= 0.5)
      whole++;
    else if (rest <= -0.5)
      whole--;
    return whole;
  }
} // namespace snmalloc::profile
