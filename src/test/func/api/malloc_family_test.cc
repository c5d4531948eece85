// Edge cases of malloc, free, calloc, realloc, reallocarray and
// malloc_usable_size, as the shim exposes them.
#include "support/alloc_checks.h"

#include <catch2/catch.hpp>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <malloc.h>
#include <set>
#include <snmalloc/snmalloc.h>
#include <thread>
#include <vector>

using namespace snmalloc_test;

namespace
{
  // Sizes across small sizeclasses, the small/large boundary (64 KiB) and
  // well into large allocations.
  const std::vector<size_t> sizes_across_classes = {
    1,     7,     8,     15,     16,     17,     31,        48,
    100,   255,   256,   257,    1000,   1024,   4095,      4096,
    4097,  10000, 16384, 32769,  65535,  65536,  65537,     100000,
    131072, 262145, 1 << 20, (1 << 20) + 1, 3 << 20};

  constexpr size_t overflowing_halves = SIZE_MAX / 2 + 1;
}

TEST_CASE("entry-points-return-snmalloc-memory")
{
  // Each function the shim must replace hands out memory snmalloc knows; a
  // function left to glibc would return a pointer snmalloc cannot size.
  std::vector<void*> blocks;
  blocks.push_back(std::malloc(opaque(200)));
  blocks.push_back(std::calloc(opaque(20), 10));
  blocks.push_back(std::realloc(nullptr, opaque(200)));
  blocks.push_back(reallocarray(nullptr, opaque(20), 10));
  blocks.push_back(memalign(64, opaque(200)));
  blocks.push_back(aligned_alloc(64, opaque(200)));
  blocks.push_back(valloc(opaque(200)));
  blocks.push_back(pvalloc(opaque(200)));
  void* p = nullptr;
  REQUIRE(posix_memalign(&p, 64, opaque(200)) == 0);
  blocks.push_back(p);
  for (void* block : blocks)
  {
    REQUIRE(block != nullptr);
    CHECK(snmalloc::alloc_size(block) >= 200);
    CHECK(malloc_usable_size(block) == snmalloc::alloc_size(block));
    std::free(block);
  }
}

TEST_CASE("malloc-zero")
{
  // malloc(0) gives a unique pointer that free accepts.
  std::set<void*> seen;
  std::vector<void*> live;
  for (int i = 0; i < 100; i++)
  {
    void* p = std::malloc(opaque(0));
    REQUIRE(p != nullptr);
    REQUIRE(seen.insert(p).second);
    live.push_back(p);
  }
  for (void* p : live)
    std::free(p);
}

TEST_CASE("free-null")
{
  // Through a volatile so the call is really made.
  void* volatile null_block = nullptr;
  std::free(null_block);
  SUCCEED("free(NULL) returned");
}

TEST_CASE("malloc-alignment-and-usable-size")
{
  for (size_t n : sizes_across_classes)
  {
    INFO("size " << n);
    void* p = std::malloc(opaque(n));
    REQUIRE(p != nullptr);
    CHECK(is_aligned(p, alignof(std::max_align_t)));
    size_t usable = malloc_usable_size(p);
    CHECK(usable >= n);
    CHECK(whole_range_writable(p, usable, n));
    std::free(p);
  }
}

TEST_CASE("malloc_usable_size-null")
{
  CHECK(malloc_usable_size(nullptr) == 0);
}

TEST_CASE("calloc-zeroes")
{
  for (size_t n : sizes_across_classes)
  {
    INFO("size " << n);
    for (size_t count : {size_t(1), size_t(3)})
    {
      auto* p = static_cast<unsigned char*>(std::calloc(opaque(count), n));
      REQUIRE(p != nullptr);
      CHECK(all_zero(p, count * n));
      std::free(p);
    }
  }
}

TEST_CASE("calloc-zeroes-reused-dirty-memory")
{
  // Dirty many blocks of one size, free them, calloc the same size: the
  // allocator hands the dirty blocks back and must clear them.
  constexpr size_t blocks = 64;
  for (size_t n : sizes_across_classes)
  {
    INFO("size " << n);
    std::vector<void*> dirty;
    for (size_t i = 0; i < blocks; i++)
    {
      void* p = std::malloc(opaque(n));
      REQUIRE(p != nullptr);
      std::memset(p, 0xA5, malloc_usable_size(p));
      dirty.push_back(p);
    }
    for (void* p : dirty)
      std::free(p);
    std::vector<void*> zeroed;
    for (size_t i = 0; i < blocks; i++)
    {
      void* p = std::calloc(1, opaque(n));
      REQUIRE(p != nullptr);
      CHECK(all_zero(p, n));
      zeroed.push_back(p);
    }
    for (void* p : zeroed)
      std::free(p);
  }
}

TEST_CASE("calloc-zero")
{
  for (auto [count, size] : {std::pair<size_t, size_t>{0, 10}, {10, 0}, {0, 0}})
  {
    void* p = std::calloc(opaque(count), size);
    REQUIRE(p != nullptr);
    std::free(p);
  }
}

TEST_CASE("calloc-overflow")
{
  // count * size wraps around; a wrapped product must not be allocated.
  const std::pair<size_t, size_t> cases[] = {
    {overflowing_halves, 2},
    {2, overflowing_halves},
    {size_t(1) << 32, size_t(1) << 32},
    {SIZE_MAX, SIZE_MAX},
    {SIZE_MAX / 16 + 1, 16},
  };
  for (auto [count, size] : cases)
  {
    INFO("calloc(" << count << ", " << size << ")");
    errno = 0;
    void* p = std::calloc(opaque(count), opaque(size));
    CHECK(p == nullptr);
    CHECK(errno == ENOMEM);
    std::free(p);
  }
}

TEST_CASE("realloc-null-is-malloc")
{
  for (size_t n : {size_t(0), size_t(1), size_t(100), size_t(70000)})
  {
    void* p = std::realloc(nullptr, opaque(n));
    REQUIRE(p != nullptr);
    CHECK(malloc_usable_size(p) >= n);
    CHECK(whole_range_writable(p, malloc_usable_size(p)));
    std::free(p);
  }
}

TEST_CASE("realloc-zero-frees")
{
  // glibc frees p and returns NULL; we match it. Freeing is checked by
  // doing it often enough that a leak would show in the resident set:
  // 20000 x 16 KiB leaked would be over 300 MiB, we allow 64 MiB of noise.
  constexpr size_t rounds = 20000;
  constexpr size_t block = 16384;
  size_t before = resident_bytes();
  for (size_t i = 0; i < rounds; i++)
  {
    void* p = std::malloc(opaque(block));
    REQUIRE(p != nullptr);
    std::memset(p, 1, block);
    void* q = std::realloc(p, opaque(0));
    REQUIRE(q == nullptr);
  }
  size_t after = resident_bytes();
  CHECK(after < before + (size_t(64) << 20));
}

TEST_CASE("realloc-keeps-contents")
{
  // Every pair of sizes: grow and shrink within a sizeclass, across
  // sizeclasses, and into and out of large allocations.
  for (size_t from : sizes_across_classes)
  {
    for (size_t to : sizes_across_classes)
    {
      INFO("realloc from " << from << " to " << to);
      void* p = std::malloc(opaque(from));
      REQUIRE(p != nullptr);
      stamp(p, from, from * 31 + to);
      void* q = std::realloc(p, opaque(to));
      REQUIRE(q != nullptr);
      CHECK(stamp_intact(q, from < to ? from : to, from * 31 + to));
      size_t usable = malloc_usable_size(q);
      CHECK(usable >= to);
      CHECK(whole_range_writable(q, usable));
      std::free(q);
    }
  }
}

TEST_CASE("realloc-in-place-when-sizeclass-stays")
{
  // A request whose fresh allocation would have the same usable size lies
  // in the same sizeclass, so realloc must keep the block where it is,
  // sampled or not (docs/design.md, realloc).
  for (size_t n : sizes_across_classes)
  {
    void* probe = std::malloc(opaque(n));
    size_t usable = malloc_usable_size(probe);
    std::free(probe);
    for (size_t m : {usable, usable - usable / 8, n, usable / 2 + 1})
    {
      void* fresh = std::malloc(opaque(m));
      bool same_class = malloc_usable_size(fresh) == usable;
      std::free(fresh);
      if (!same_class || m == 0)
        continue;
      INFO("realloc from " << n << " to " << m << " (usable " << usable << ")");
      void* p = std::malloc(opaque(n));
      REQUIRE(p != nullptr);
      stamp(p, n < m ? n : m, m);
      void* q = std::realloc(p, opaque(m));
      REQUIRE(q != nullptr);
      CHECK(q == p);
      CHECK(stamp_intact(q, n < m ? n : m, m));
      std::free(q);
    }
  }
}

TEST_CASE("reallocarray-overflow")
{
  void* p = std::malloc(opaque(64));
  REQUIRE(p != nullptr);
  stamp(p, 64, 7);
  errno = 0;
  void* q = reallocarray(p, opaque(overflowing_halves), 2);
  CHECK(q == nullptr);
  CHECK(errno == ENOMEM);
  // On failure the original block is untouched and still owned by us.
  CHECK(stamp_intact(p, 64, 7));
  std::free(p);

  errno = 0;
  CHECK(reallocarray(nullptr, opaque(SIZE_MAX), opaque(SIZE_MAX)) == nullptr);
  CHECK(errno == ENOMEM);
}

TEST_CASE("reallocarray-grows")
{
  auto* p = static_cast<uint32_t*>(reallocarray(nullptr, opaque(10), 4));
  REQUIRE(p != nullptr);
  for (uint32_t i = 0; i < 10; i++)
    p[i] = i * 3;
  p = static_cast<uint32_t*>(reallocarray(p, opaque(50000), 4));
  REQUIRE(p != nullptr);
  CHECK(malloc_usable_size(p) >= 200000);
  for (uint32_t i = 0; i < 10; i++)
    CHECK(p[i] == i * 3);
  std::free(p);
}

TEST_CASE("malloc-zero-keeps-the-fast-list")
{
  // malloc(0) takes the slow path; it must not throw away the objects
  // already waiting in the 16-byte class's list (a slab leaked per call
  // before: 20,000 calls grew the resident set by 320 MB).
  void* keep = std::malloc(16);
  const size_t before = snmalloc_test::resident_bytes();
  for (int i = 0; i < 20000; i++)
  {
    void* p = std::malloc(0);
    REQUIRE(p != nullptr);
    std::free(p);
  }
  const size_t after = snmalloc_test::resident_bytes();
  std::free(keep);
  CHECK(after < before + (size_t(16) << 20));
}

namespace
{
  // Every way to ask for zero bytes at the default alignment (the first
  // eight and the last, operator new), and two at a larger one (the ninth
  // and tenth).
  std::vector<void*> zero_size_allocations()
  {
    std::vector<void*> v;
    v.push_back(std::malloc(opaque(0)));
    v.push_back(std::calloc(opaque(0), 8));
    v.push_back(std::calloc(8, opaque(0)));
    v.push_back(std::realloc(nullptr, opaque(0)));
    v.push_back(reallocarray(nullptr, opaque(0), 8));
    v.push_back(aligned_alloc(16, opaque(0)));
    v.push_back(memalign(8, opaque(0)));
    void* p = nullptr;
    v.push_back(posix_memalign(&p, 16, opaque(0)) == 0 ? p : nullptr);
    v.push_back(aligned_alloc(64, opaque(0)));
    v.push_back(posix_memalign(&p, 256, opaque(0)) == 0 ? p : nullptr);
    v.push_back(::operator new(opaque(0)));
    return v;
  }
} // namespace

TEST_CASE("zero-size-allocations-of-every-entry-point")
{
  // Unique, aligned, usable size at most their class's, and freeable;
  // copies and fills of zero bytes at them are no access.
  std::set<void*> seen;
  std::vector<void*> all;
  for (int round = 0; round < 50; round++)
  {
    std::vector<void*> v = zero_size_allocations();
    for (size_t i = 0; i < v.size(); i++)
    {
      void* p = v[i];
      REQUIRE(p != nullptr);
      REQUIRE(seen.insert(p).second);
      CHECK(is_aligned(p, i == 8 ? 64 : i == 9 ? 256 : 16));
      // An inaccessible slot of 0 bytes, while the 4096 slots last (the
      // checks build: a 16-byte object, whose copies it bounds).
      if (i < 8 || i == 10)
        CHECK(malloc_usable_size(p) == (snmalloc::config::checks ? 16 : 0));
      char byte = 1;
      std::memset(p, 0, opaque(0));
      std::memcpy(p, &byte, opaque(0));
      std::memcpy(&byte, p, opaque(0));
      CHECK(byte == 1);
      all.push_back(p);
    }
  }
  for (size_t i = 0; i < all.size(); i++)
  {
    if (i % 11 == 10)
      ::operator delete(all[i], size_t(0));
    else
      std::free(all[i]);
  }
}

TEST_CASE("zero-size-allocation-realloc")
{
  // Grown: the new block is whole and writable; shrunk back to 0: freed.
  for (size_t n : {size_t(1), size_t(16), size_t(100), size_t(70000)})
  {
    void* p = std::malloc(opaque(0));
    void* q = std::realloc(p, opaque(n));
    REQUIRE(q != nullptr);
    CHECK(malloc_usable_size(q) >= n);
    CHECK(whole_range_writable(q, n));
    CHECK(std::realloc(q, opaque(0)) == nullptr);
  }
  void* p = std::malloc(opaque(0));
  void* q = std::realloc(p, opaque(0));
  CHECK(q == nullptr);
}

TEST_CASE("zero-size-allocations-in-a-loop-do-not-grow")
{
  // malloc(0)/free pairs reuse their addresses; more live zero-size
  // allocations than the inaccessible slots (4096) are ordinary ones, all
  // unique and freeable.
  const size_t before = resident_bytes();
  for (int i = 0; i < 200000; i++)
  {
    void* p = std::malloc(0);
    REQUIRE(p != nullptr);
    escape(p);
    std::free(p);
  }
  std::set<void*> seen;
  std::vector<void*> live;
  for (int i = 0; i < 10000; i++)
  {
    void* p = std::malloc(opaque(0));
    REQUIRE(seen.insert(p).second);
    live.push_back(p);
  }
  for (void* p : live)
    std::free(p);
  for (int i = 0; i < 200000; i++)
    std::free(std::malloc(opaque(0)));
  CHECK(resident_bytes() < before + (size_t(16) << 20));
}

TEST_CASE("zero-size-allocations-across-threads")
{
  // Taken and freed on four threads at once, and freed by another thread.
  std::vector<void*> handed[4];
  std::vector<std::thread> threads;
  for (auto& mine : handed)
  {
    threads.emplace_back([&mine] {
      std::vector<void*> v;
      for (int i = 0; i < 20050; i++)
      {
        v.push_back(std::malloc(opaque(0)));
        if (v.size() == 100)
        {
          for (void* p : v)
            std::free(p);
          v.clear();
        }
      }
      mine = v;
    });
  }
  for (auto& t : threads)
    t.join();
  std::set<void*> seen;
  for (auto& v : handed)
    for (void* p : v)
      REQUIRE(seen.insert(p).second);
  std::thread([&] {
    for (auto& v : handed)
      for (void* p : v)
        std::free(p);
  }).join();
}
