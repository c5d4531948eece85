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

    // log(c) for 1/2 <= c <= 2, as 2 atanh((c - 1) / (c + 1)) in long
    // double, the series run until its terms vanish (|s| <= 1/3); exactly
    // 0 at 1.
    constexpr long double log_long(long double c)
    {
      long double s = (c - 1) / (c + 1);
      long double s2 = s * s, power = s, sum = 0;
      for (int k = 1; k < 80; k += 2)
      {
        sum += power / k;
        power *= s2;
      }
      return 2 * sum;
    }

    // log_of's table: a mantissa m in [1, 2) falls in one of LOG_STEPS
    // bins by its top bits, each with a point c near which log(m) =
    // log(c) + 2 atanh((m - c) / (m + c)), |(m - c) / (m + c)| < 2^-7.
    // c is the bin's middle, a double of 8 bits (so m - c is exact), but 1
    // in the first bin and 2 in the last: there log(m) or log(m / 2) is
    // near zero, and is got without cancellation.  The upper bins count
    // their mantissa as m / 2 and one more in the exponent, so that x just
    // below 1 (exponent -1, m near 2) has nothing to cancel either.
    constexpr int LOG_STEP_BITS = 6;
    constexpr int LOG_STEPS = 1 << LOG_STEP_BITS;
    struct LogBin
    {
      double c;
      double exponent_step; // 1 where m counts as m / 2
      TwoPart log_c; // log(c / 2^exponent_step)
    };
    struct LogTable
    {
      LogBin bin[LOG_STEPS] = {};
      constexpr LogTable()
      {
        for (int j = 0; j < LOG_STEPS; j++)
        {
          long double c = j == 0 ? 1.0L
            : j == LOG_STEPS - 1 ? 2.0L
                                 : 1.0L + (j + 0.5L) / LOG_STEPS;
          bool upper = c * c > 2; // m above sqrt(2)
          long double log_c = log_long(upper ? c / 2 : c);
          bin[j] = {double(c), upper ? 1.0 : 0.0, two_part(log_c)};
        }
      }
    };
    constexpr LogTable LOG_TABLE{};
  } // namespace float_math_detail

  // Natural logarithm of a positive, normal, finite x (the sampler's
  // uniform draw in (0, 1]): x = 2^e m, m in [1, 2), and log(m) from the
  // table's point c for m's top bits and the series of 2 atanh(s),
  // s = (m - c) / (m + c), whose terms from s^9 on are below 2^-59 of it:
  // three terms and a division, where the series from 1 needed twelve
  // (107 instructions a sample point drawn, now about 45).
  inline double log_of(double x)
  {
    using namespace float_math_detail;
    uint64_t b = bits_of(x);
    const LogBin& bin = LOG_TABLE.bin[(b >> (52 - LOG_STEP_BITS)) & (LOG_STEPS - 1)];
    double m = double_of((b & ((uint64_t(1) << 52) - 1)) | (uint64_t(1023) << 52));
    double e = double(int64_t(b >> 52) - 1023) + bin.exponent_step;
    double s = (m - bin.c) / (m + bin.c);
    double s2 = s * s;
    double series = s2 * (1.0 / 3 + s2 * (1.0 / 5 + s2 * (1.0 / 7)));
    // e log(2) + log(c) in two parts: the high parts' sum, its rounding
    // error and every low part; |e LN2_HIGH| >= |log(c)| unless e is 0.
    double high = e * LN2_HIGH + bin.log_c.high;
    double error = (e * LN2_HIGH - high) + bin.log_c.high;
    double low = error + (e * LN2_LOW + bin.log_c.low);
    return high + (low + (2 * s + 2 * s * series));
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
