// profile/base/float_math.h against libm: the sampler's log over its whole
// domain (u in (0, 1], multiples of 2^-53), log1p over count mode's
// log(1 - 1/N) and a band around zero, expm1 over the sample weights'
// arguments (-size/R for sizes 1 byte to 2^40 and R from 1 to 2^40) and a
// band around zero, and llround over halves and arbitrary values.  Within
// 2 ulps (libm's own are within 1).
#include <snmalloc/profile/base/float_math.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <random>

using namespace snmalloc::profile;

namespace
{
  double ulps_apart(double a, double b)
  {
    if (a == b)
      return 0;
    return std::fabs(a - b) / std::fabs(std::nextafter(b, INFINITY) - b);
  }
} // namespace

TEST_CASE("log_of is libm's log to 2 ulps for 0 < u <= 1")
{
  std::mt19937_64 random(1);
  double worst = 0;
  for (int i = 0; i < 1000000; i++)
  {
    double u = double((random() >> 11) + 1) * 0x1.0p-53;
    worst = std::fmax(worst, ulps_apart(log_of(u), std::log(u)));
  }
  for (double u : {0x1.0p-53, 0.5, 1.0, 0.7071067811865476, 0.7071067811865475})
    worst = std::fmax(worst, ulps_apart(log_of(u), std::log(u)));
  CHECK(log_of(1.0) == 0.0);
  CHECK(worst <= 2);
}

TEST_CASE("log1p_of is libm's log1p to 4 ulps for count mode's log(1 - 1/N)")
{
  std::mt19937_64 random(4);
  double worst = 0;
  for (int i = 0; i < 1000000; i++)
  {
    double n = std::floor(std::ldexp(1.0 + double(random() >> 11) * 0x1.0p-53, int(random() % 40))) + 1;
    double x = -1.0 / n;
    worst = std::fmax(worst, ulps_apart(log1p_of(x), std::log1p(x)));
    double y = (double(random() >> 11) * 0x1.0p-53 - 0.5);
    worst = std::fmax(worst, ulps_apart(log1p_of(y), std::log1p(y)));
  }
  CHECK(log1p_of(0.0) == 0.0);
  CHECK(worst <= 4);
}

TEST_CASE("expm1_of is libm's expm1 to 2 ulps for the sample weights' arguments")
{
  std::mt19937_64 random(2);
  double worst = 0;
  for (int i = 0; i < 1000000; i++)
  {
    double size = std::ldexp(double(random() >> 11) * 0x1.0p-53, int(random() % 41));
    double interval = std::ldexp(1.0, int(random() % 41));
    double x = -(std::floor(size) + 1) / interval;
    worst = std::fmax(worst, ulps_apart(expm1_of(x), std::expm1(x)));
    double near_zero = (double(random() >> 11) * 0x1.0p-53 - 0.5) * 2;
    worst = std::fmax(worst, ulps_apart(expm1_of(near_zero), std::expm1(near_zero)));
  }
  for (double x : {-0.5, 0.5, -1e-300, -700.0, -708.0, 1.0, 700.0})
    worst = std::fmax(worst, ulps_apart(expm1_of(x), std::expm1(x)));
  CHECK(expm1_of(-1000.0) == -1.0);
  CHECK(worst <= 2);
}

TEST_CASE("round_of rounds as llround does, halves away from zero")
{
  std::mt19937_64 random(3);
  for (int i = 0; i < 1000000; i++)
  {
    double x = std::ldexp(double(random() >> 11) * 0x1.0p-53, int(random() % 62));
    if (i % 2 == 1)
      x = -x;
    REQUIRE(round_of(x) == std::llround(x));
    double half = double(int64_t(random() % 1000000)) + 0.5;
    REQUIRE(round_of(half) == std::llround(half));
    REQUIRE(round_of(-half) == std::llround(-half));
  }
  CHECK(round_of(0.49999999999999994) == 0);
  CHECK(round_of(2.5) == 3);
  CHECK(round_of(-2.5) == -3);
}
