// profile/samples/lifetime_stats.h on its own: lifetimes fall in the bucket
// whose range holds them (each limit starts the next bucket), and a site's
// cells add up weights and weighted lifetimes exactly, apart by freeing
// thread, for sites in different blocks and in any order.
#include <snmalloc/profile/samples/lifetime_stats.h>

#include <catch2/catch.hpp>
#include <string>

using namespace snmalloc::profile;

TEST_CASE("lifetimes fall in their log-scale bucket, limits starting the next")
{
  CHECK(std::string(LIFETIME_BUCKET_NAMES[lifetime_bucket(0)]) == "<1us");
  CHECK(std::string(LIFETIME_BUCKET_NAMES[lifetime_bucket(999)]) == "<1us");
  CHECK(std::string(LIFETIME_BUCKET_NAMES[lifetime_bucket(1000)]) == "<10us");
  CHECK(std::string(LIFETIME_BUCKET_NAMES[lifetime_bucket(9999)]) == "<10us");
  CHECK(std::string(LIFETIME_BUCKET_NAMES[lifetime_bucket(123456789)]) == "<1s");
  CHECK(std::string(LIFETIME_BUCKET_NAMES[lifetime_bucket(59999999999)]) == "<1min");
  CHECK(std::string(LIFETIME_BUCKET_NAMES[lifetime_bucket(60000000000)]) == "<10min");
  CHECK(std::string(LIFETIME_BUCKET_NAMES[lifetime_bucket(3599999999999)]) == "<1h");
  CHECK(std::string(LIFETIME_BUCKET_NAMES[lifetime_bucket(3600000000000)]) == ">=1h");
  CHECK(std::string(LIFETIME_BUCKET_NAMES[lifetime_bucket(INT64_MAX)]) == ">=1h");
  for (size_t b = 0; b + 1 < LIFETIME_BUCKETS; b++)
  {
    CHECK(lifetime_bucket(LIFETIME_LIMITS_NS[b] - 1) == b);
    CHECK(lifetime_bucket(LIFETIME_LIMITS_NS[b]) == b + 1);
  }
}

TEST_CASE("a site's lifetime cells add weights and weighted lifetimes, by freeing thread")
{
  static LifetimeTable table; // 64 KiB of block pointers: not on the stack
  auto freed = [](uint32_t site, int64_t lifetime_ns, bool by_other_thread, double weight) {
    table.freed({site, by_other_thread, lifetime_ns, weight, lifetime_bucket(lifetime_ns)});
  };
  // Site 5000 (second block) first, then 3 (first block); 7 never freed.
  freed(5000, 2500000, true, 4.0); // <10ms, other thread
  freed(3, 500, false, 1.5); // <1us
  freed(3, 700, false, 0.5); // <1us
  freed(3, 50000, true, 2.0); // <100us, other thread
  freed(3, 0, false, 1.0); // <1us (a clock read backwards ends as 0)
  size_t visited = 0;
  table.for_each([&](uint32_t site, const SiteLifetimes& s) {
    double total = 0;
    for (const auto& by_thread : s.cells)
      for (const LifetimeCell& c : by_thread)
        total += c.objects;
    if (site == 3)
    {
      visited++;
      CHECK(s.cells[0][0].objects == 3.0);
      CHECK(s.cells[0][0].lifetime_ns == 1.5 * 500 + 0.5 * 700);
      CHECK(s.cells[1][2].objects == 2.0);
      CHECK(s.cells[1][2].lifetime_ns == 100000.0);
      CHECK(total == 5.0);
    }
    else if (site == 5000)
    {
      visited++;
      CHECK(s.cells[1][4].objects == 4.0);
      CHECK(s.cells[1][4].lifetime_ns == 10000000.0);
      CHECK(total == 4.0);
    }
    else
      CHECK(total == 0.0);
  });
  CHECK(visited == 2);
  CHECK(table.os_bytes() == 2 * (sizeof(SiteLifetimes) << 12));
}
