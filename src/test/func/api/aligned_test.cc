// Aligned allocation through every entry point: memalign, aligned_alloc,
// posix_memalign, valloc, pvalloc, operator new(std::align_val_t) and
// snmalloc::alloc_aligned, with their invalid-argument cases.
#include "support/alloc_checks.h"

#include <catch2/catch.hpp>
#include <cerrno>
#include <cstdlib>
#include <functional>
#include <malloc.h>
#include <new>
#include <set>
#include <snmalloc/snmalloc.h>
#include <string>
#include <vector>

using namespace snmalloc_test;

namespace
{
  constexpr size_t largest_alignment = size_t(1) << 20;

  struct AlignedEntryPoint
  {
    std::string name;
    // Smallest alignment the function accepts.
    size_t min_alignment;
    std::function<void*(size_t align, size_t size)> allocate;
    std::function<void(void* p, size_t align, size_t size)> release;
  };

  void free_block(void* p, size_t, size_t)
  {
    std::free(p);
  }

  std::vector<AlignedEntryPoint> aligned_entry_points()
  {
    return {
      {"memalign", 1, [](size_t a, size_t n) { return memalign(a, n); },
       free_block},
      {"aligned_alloc", 1,
       [](size_t a, size_t n) { return aligned_alloc(a, n); }, free_block},
      {"posix_memalign", sizeof(void*),
       [](size_t a, size_t n) {
         void* p = nullptr;
         return posix_memalign(&p, a, n) == 0 ? p : nullptr;
       },
       free_block},
      {"operator new(align_val_t)", 1,
       [](size_t a, size_t n) {
         return ::operator new(n, std::align_val_t(a));
       },
       [](void* p, size_t a, size_t) {
         ::operator delete(p, std::align_val_t(a));
       }},
      {"operator new(align_val_t) + sized delete", 1,
       [](size_t a, size_t n) {
         return ::operator new(n, std::align_val_t(a));
       },
       [](void* p, size_t a, size_t n) {
         ::operator delete(p, n, std::align_val_t(a));
       }},
      {"operator new[](align_val_t)", 1,
       [](size_t a, size_t n) {
         return ::operator new[](n, std::align_val_t(a));
       },
       [](void* p, size_t a, size_t n) {
         ::operator delete[](p, n, std::align_val_t(a));
       }},
      {"operator new(align_val_t, nothrow)", 1,
       [](size_t a, size_t n) {
         return ::operator new(n, std::align_val_t(a), std::nothrow);
       },
       [](void* p, size_t a, size_t) {
         ::operator delete(p, std::align_val_t(a), std::nothrow);
       }},
      {"operator new[](align_val_t, nothrow)", 1,
       [](size_t a, size_t n) {
         return ::operator new[](n, std::align_val_t(a), std::nothrow);
       },
       [](void* p, size_t a, size_t) {
         ::operator delete[](p, std::align_val_t(a));
       }},
      {"snmalloc::alloc_aligned", 1,
       [](size_t a, size_t n) { return snmalloc::alloc_aligned(a, n); },
       [](void* p, size_t, size_t) { snmalloc::dealloc(p); }},
      {"snmalloc::alloc_aligned + sized dealloc", 1,
       [](size_t a, size_t n) { return snmalloc::alloc_aligned(a, n); },
       [](void* p, size_t, size_t n) { snmalloc::dealloc(p, n); }},
    };
  }

  std::set<size_t> sizes_for_alignment(size_t align)
  {
    return {0, 1, align - 1, align, align + 1, 3 * align};
  }
}

TEST_CASE("aligned-every-power-of-two")
{
  for (auto& entry : aligned_entry_points())
  {
    for (size_t align = entry.min_alignment; align <= largest_alignment;
         align *= 2)
    {
      for (size_t n : sizes_for_alignment(align))
      {
        INFO(entry.name << " align " << align << " size " << n);
        void* p = entry.allocate(opaque(align), opaque(n));
        REQUIRE(p != nullptr);
        CHECK(is_aligned(p, align));
        size_t usable = malloc_usable_size(p);
        CHECK(usable >= n);
        CHECK(snmalloc::alloc_size(p) == usable);
        CHECK(whole_range_writable(p, usable, align ^ n));
        entry.release(p, align, n);
      }
    }
  }
}

TEST_CASE("aligned-blocks-are-distinct-while-live")
{
  // Many live blocks of each alignment: aligned placement must not make two
  // blocks overlap.
  for (size_t align = 16; align <= 65536; align *= 4)
  {
    INFO("align " << align);
    std::vector<std::pair<void*, uint64_t>> live;
    for (uint64_t i = 0; i < 64; i++)
    {
      void* p = aligned_alloc(opaque(align), align);
      REQUIRE(p != nullptr);
      stamp(p, align, i * align);
      live.emplace_back(p, i * align);
    }
    for (auto [p, seed] : live)
    {
      CHECK(stamp_intact(p, align, seed));
      std::free(p);
    }
  }
}

TEST_CASE("realloc-of-aligned-block")
{
  // realloc need not keep the alignment, but must keep the contents and
  // accept the block wherever aligned allocation placed it.
  for (size_t align = 16; align <= largest_alignment; align *= 4)
  {
    for (size_t new_size : {align / 2 + 1, 3 * align + 5})
    {
      INFO("align " << align << " realloc to " << new_size);
      void* p = aligned_alloc(opaque(align), align);
      REQUIRE(p != nullptr);
      stamp(p, align, align);
      void* q = std::realloc(p, opaque(new_size));
      REQUIRE(q != nullptr);
      CHECK(stamp_intact(q, new_size < align ? new_size : align, align));
      CHECK(malloc_usable_size(q) >= new_size);
      std::free(q);
    }
  }
}

TEST_CASE("posix_memalign-nopow2")
{
  // Alignment must be a power of two and a multiple of sizeof(void*).
  for (size_t align : {size_t(0), size_t(1), size_t(2), size_t(3), size_t(4),
                       size_t(12), size_t(24), size_t(48), size_t(4097),
                       SIZE_MAX})
  {
    INFO("alignment " << align);
    void* sentinel = &align;
    void* p = sentinel;
    CHECK(posix_memalign(&p, opaque(align), 16) == EINVAL);
    // On failure the output is left alone.
    CHECK(p == sentinel);
  }
}

TEST_CASE("aligned_alloc-nopow2")
{
  for (size_t align : {size_t(0), size_t(3), size_t(24), size_t(48),
                       size_t(100), size_t(4097)})
  {
    INFO("alignment " << align);
    errno = 0;
    void* p = aligned_alloc(opaque(align), 64);
    CHECK(p == nullptr);
    CHECK(errno == EINVAL);
    std::free(p);
  }
}

TEST_CASE("memalign-nopow2-rounds-up-as-glibc")
{
  // glibc's memalign takes any alignment, rounding it up to a power of
  // two, and treats 0 as 1; preloaded programs rely on that.
  const std::pair<size_t, size_t> cases[] = {
    {0, 1}, {3, 4}, {24, 32}, {48, 64}, {100, 128}, {4097, 8192}, {(size_t(1) << 20) + 1, size_t(1) << 21}};
  for (const auto& [align, rounded] : cases)
  {
    INFO("alignment " << align);
    void* p = memalign(opaque(align), 100);
    REQUIRE(p != nullptr);
    CHECK(reinterpret_cast<uintptr_t>(p) % rounded == 0);
    CHECK(malloc_usable_size(p) >= 100);
    std::memset(p, 0x5a, 100);
    std::free(p);
  }
  errno = 0;
  CHECK(memalign(opaque(SIZE_MAX), 16) == nullptr);
  CHECK(errno == EINVAL);
}

TEST_CASE("valloc-page-aligned")
{
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  for (size_t n : {size_t(0), size_t(1), page - 1, page, page + 1,
                   size_t(100000)})
  {
    INFO("size " << n);
    void* p = valloc(opaque(n));
    REQUIRE(p != nullptr);
    CHECK(is_aligned(p, page));
    CHECK(malloc_usable_size(p) >= n);
    CHECK(whole_range_writable(p, malloc_usable_size(p)));
    std::free(p);
  }
}

TEST_CASE("pvalloc-rounds-to-pages")
{
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  for (size_t n : {size_t(0), size_t(1), page - 1, page, page + 1,
                   size_t(100000)})
  {
    INFO("size " << n);
    size_t rounded = (n + page - 1) / page * page;
    void* p = pvalloc(opaque(n));
    REQUIRE(p != nullptr);
    CHECK(is_aligned(p, page));
    CHECK(malloc_usable_size(p) >= rounded);
    CHECK(whole_range_writable(p, rounded));
    std::free(p);
  }
}
