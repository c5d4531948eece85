// The numeric label `requested`, the bytes each allocation asked for.  Live
// rows carry each object's own request, however many a site sees; the
// cumulative alloc_* figures are counted per stack and object size, so
// their row carries `requested` only where every allocation sampled there
// asked for the same size.  Exact mode (R == 1), on a fresh thread (no
// slab filled before profiling started): one call of a site asks for two
// sizes of one sizeclass, one stack; another site for one size only.
#include "support/files.h"
#include "support/pprof_output.h"
#include "support/profiling.h"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <malloc.h>
#include <new>

using namespace snmalloc_test;

namespace
{
  // 1000 and 1001 bytes share a sizeclass (the test checks it); every
  // fourth allocation asks for the first.
  constexpr size_t MIXED[] = {1000, 1001};
  constexpr size_t MIXED_COUNTS[] = {100, 300};
  constexpr size_t ONE_SIZE = 700;
  constexpr size_t ONE_COUNT = 50;
} // namespace

__attribute__((noinline)) void requested_mixed_site(std::vector<void*>& held)
{
  for (size_t i = 0; i < MIXED_COUNTS[0] + MIXED_COUNTS[1]; i++)
    held.push_back(std::malloc(MIXED[i % 4 == 0 ? 0 : 1]));
}

// Aligned requests, which the allocator serves at their size rounded up
// for the alignment, through each aligned entry point.
namespace
{
  enum class AlignedBy
  {
    PosixMemalign,
    Memalign,
    AlignedAlloc,
    AlignedNew
  };

  struct AlignedShape
  {
    AlignedBy by;
    size_t alignment, size;
  };

  constexpr AlignedShape ALIGNED_SHAPES[] = {
    {AlignedBy::PosixMemalign, 64, 35},
    {AlignedBy::Memalign, 2048, 51},
    {AlignedBy::AlignedAlloc, 4096, 5000},
    {AlignedBy::AlignedNew, 128, 100},
    {AlignedBy::PosixMemalign, 65536, 100000},
    {AlignedBy::Memalign, 256, 70000}};
  constexpr size_t ALIGNED_COUNT = 20;
} // namespace

__attribute__((noinline)) void* requested_aligned_site(const AlignedShape& shape)
{
  void* p = nullptr;
  switch (shape.by)
  {
    case AlignedBy::PosixMemalign:
      if (posix_memalign(&p, shape.alignment, shape.size) != 0)
        p = nullptr;
      break;
    case AlignedBy::Memalign:
      p = memalign(shape.alignment, shape.size);
      break;
    case AlignedBy::AlignedAlloc:
      p = aligned_alloc(shape.alignment, shape.size);
      break;
    case AlignedBy::AlignedNew:
      p = ::operator new(shape.size, std::align_val_t(shape.alignment));
      break;
  }
  return p;
}

__attribute__((noinline)) void requested_one_site(std::vector<void*>& held, size_t n)
{
  for (size_t i = 0; i < n; i++)
    held.push_back(std::malloc(ONE_SIZE));
}

TEST_CASE("requested label: live rows per request, alloc rows only where the request is one")
{
  REQUIRE(usable_size_unsampled(MIXED[0]) == usable_size_unsampled(MIXED[1]));
  TempDir dir;
  std::vector<void*> held;
  held.reserve(1000);
  {
    ProfilingAt exact(1);
    on_fresh_thread([&] {
      requested_mixed_site(held);
      requested_one_site(held, ONE_COUNT);
    });
    dump_or_fail(dir.file("requested.pb.gz"));
  }
  std::string file = dir.file("requested.pb.gz");
  SiteTable all(file);
  size_t mixed_total = MIXED_COUNTS[0] + MIXED_COUNTS[1];
  CHECK(all["requested_mixed_site"].inuse_objects == int64_t(mixed_total));
  CHECK(all["requested_mixed_site"].alloc_objects == int64_t(mixed_total));
  CHECK(all["requested_mixed_site"].alloc_space == int64_t(mixed_total * usable_size_unsampled(MIXED[0])));
  for (size_t k = 0; k < 2; k++)
  {
    SiteTable asked(file, "-tagfocus=requested=" + std::to_string(MIXED[k]) + "B");
    INFO("requested " << MIXED[k]);
    CHECK(asked["requested_mixed_site"].inuse_objects == int64_t(MIXED_COUNTS[k]));
    CHECK(asked["requested_mixed_site"].inuse_space == int64_t(MIXED_COUNTS[k] * usable_size_unsampled(MIXED[k])));
    // Two requests at one (stack, size): the cumulative row names neither.
    CHECK(asked["requested_mixed_site"].alloc_objects == 0);
  }
  SiteTable one(file, "-tagfocus=requested=" + std::to_string(ONE_SIZE) + "B");
  CHECK(one["requested_one_site"].inuse_objects == int64_t(ONE_COUNT));
  CHECK(one["requested_one_site"].alloc_objects == int64_t(ONE_COUNT));
  CHECK(one["requested_one_site"].alloc_space == int64_t(ONE_COUNT * usable_size_unsampled(ONE_SIZE)));
  for (void* p : held)
    std::free(p);
}

TEST_CASE("requested label: an aligned allocation carries the bytes asked for, not its rounded size")
{
  TempDir dir;
  std::vector<std::pair<const AlignedShape*, void*>> held;
  {
    ProfilingAt exact(1);
    on_fresh_thread([&] {
      for (size_t i = 0; i < ALIGNED_COUNT; i++)
      {
        for (const AlignedShape& shape : ALIGNED_SHAPES)
          held.emplace_back(&shape, requested_aligned_site(shape));
      }
    });
    dump_or_fail(dir.file("aligned.pb.gz"));
  }
  for (auto& [shape, p] : held)
    REQUIRE(p != nullptr);
  std::string file = dir.file("aligned.pb.gz");
  CHECK(
    SiteTable(file)["requested_aligned_site"].inuse_objects ==
    int64_t(ALIGNED_COUNT * std::size(ALIGNED_SHAPES)));
  for (const AlignedShape& shape : ALIGNED_SHAPES)
  {
    INFO("alignment " << shape.alignment << ", size " << shape.size);
    SiteTable asked(file, "-tagfocus=requested=" + std::to_string(shape.size) + "B");
    CHECK(asked["requested_aligned_site"].inuse_objects == int64_t(ALIGNED_COUNT));
  }
  for (auto& [shape, p] : held)
  {
    if (shape->by == AlignedBy::AlignedNew)
      ::operator delete(p, std::align_val_t(shape->alignment));
    else
      std::free(p);
  }
}
