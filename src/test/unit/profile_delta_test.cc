// profile_delta (heap?seconds=N): rows matched on what the encoder writes
// for a row (its stack's return addresses, bytes, thread, and requested on
// live rows), with exact values: no sampling involved.

#include <catch2/catch.hpp>
#include <snmalloc/profile/pprof/profile_delta.h>

using namespace snmalloc::profile;

namespace
{
  ProfileBucket row(
    const uintptr_t* frames,
    uint32_t depth,
    double alloc_objects,
    double alloc_bytes,
    double inuse_objects,
    double inuse_bytes,
    uint64_t thread = 0,
    uint64_t requested = 64)
  {
    return {frames, depth, 64, alloc_objects, alloc_bytes, inuse_objects, inuse_bytes, requested, thread};
  }

  const ProfileBucket* find(const std::vector<ProfileBucket>& rows, const uintptr_t* frames, uint64_t thread)
  {
    for (const ProfileBucket& r : rows)
    {
      if (r.frames[0] == frames[0] && r.thread_id == thread)
        return &r;
    }
    return nullptr;
  }
}

TEST_CASE("delta: matched rows subtract, unmatched ones stay or are negated", "[delta]")
{
  const uintptr_t a[] = {0x1000, 0x2000}, b[] = {0x3000, 0x4000}, c[] = {0x5000};
  // The same stack as `a` in another array: matched by content.
  const uintptr_t a_again[] = {0x1000, 0x2000};
  std::vector<ProfileBucket> before{
    row(a, 2, 10, 640, 0, 0), // a's cumulative row
    row(a, 2, 0, 0, 4, 256, 7), // a's live row, thread 7
    row(c, 1, 0, 0, 2, 128, 7), // freed in the window
  };
  std::vector<ProfileBucket> after{
    row(a_again, 2, 15, 960, 0, 0),
    row(a_again, 2, 0, 0, 4, 256, 7), // unchanged: comes to zero
    row(a, 2, 0, 0, 5, 320, 8), // another thread: not matched with thread 7
    row(b, 2, 3, 192, 3, 192, 7), // new in the window
  };
  std::vector<ProfileBucket> d = profile_delta(before, after);
  REQUIRE(d.size() == 4);
  const ProfileBucket* cumulative = find(d, a, 0);
  REQUIRE(cumulative != nullptr);
  CHECK(cumulative->alloc_objects == 5);
  CHECK(cumulative->alloc_bytes == 320);
  CHECK(find(d, a, 7) == nullptr); // zero rows are left out
  REQUIRE(find(d, a, 8) != nullptr);
  CHECK(find(d, a, 8)->inuse_bytes == 320);
  REQUIRE(find(d, b, 7) != nullptr);
  CHECK(find(d, b, 7)->alloc_bytes == 192);
  const ProfileBucket* freed = find(d, c, 7);
  REQUIRE(freed != nullptr);
  CHECK(freed->inuse_objects == -2);
  CHECK(freed->inuse_bytes == -128);
  CHECK(freed->alloc_objects == 0);
}

TEST_CASE("delta: a different requested size or depth is a different row", "[delta]")
{
  const uintptr_t a[] = {0x1000, 0x2000, 0x3000};
  std::vector<ProfileBucket> before{row(a, 3, 1, 64, 1, 64, 7, 64)};
  std::vector<ProfileBucket> after{row(a, 3, 1, 64, 1, 64, 7, 60), row(a, 2, 1, 64, 1, 64, 7, 64)};
  std::vector<ProfileBucket> d = profile_delta(before, after);
  CHECK(d.size() == 3); // nothing matched: both after rows, the before row negated
}

TEST_CASE("delta: a cumulative row is matched though its requested size became unknown", "[delta]")
{
  // The site saw 64-byte requests only, then a 60-byte one: its requested
  // size reads 0 (unknown) in the later profile.
  const uintptr_t a[] = {0x1000, 0x2000};
  std::vector<ProfileBucket> before{row(a, 2, 10, 640, 0, 0, 0, 64)};
  std::vector<ProfileBucket> after{row(a, 2, 12, 764, 0, 0, 0, 0)};
  std::vector<ProfileBucket> d = profile_delta(before, after);
  REQUIRE(d.size() == 1);
  CHECK(d[0].alloc_objects == 2);
  CHECK(d[0].alloc_bytes == 124);
  CHECK(d[0].requested_size == 0); // the later profile's label
}

TEST_CASE("delta of a profile with itself is empty", "[delta]")
{
  const uintptr_t a[] = {0x1000}, b[] = {0x2000};
  std::vector<ProfileBucket> p{row(a, 1, 3, 192, 1, 64), row(b, 1, 0, 0, 2, 128, 9)};
  CHECK(profile_delta(p, p).empty());
}
