// Requests no allocator can satisfy: every entry point fails cleanly (NULL
// and ENOMEM, or std::bad_alloc) and never crashes.
#include "support/alloc_checks.h"

#include <catch2/catch.hpp>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <malloc.h>
#include <new>
#include <snmalloc/snmalloc.h>

using namespace snmalloc_test;

namespace
{
  // Larger than any address space a user process has on x86-64 (47 bits),
  // and sizes whose rounding up to a sizeclass or page would overflow.
  const size_t huge_sizes[] = {
    SIZE_MAX,
    SIZE_MAX - 4095,
    SIZE_MAX / 2,
    size_t(PTRDIFF_MAX) + 1,
    size_t(1) << 47,
  };
}

TEST_CASE("malloc-huge")
{
  for (size_t n : huge_sizes)
  {
    INFO("size " << n);
    errno = 0;
    void* p = std::malloc(opaque(n));
    CHECK(p == nullptr);
    CHECK(errno == ENOMEM);
    std::free(p);
  }
}

TEST_CASE("calloc-huge")
{
  for (size_t n : huge_sizes)
  {
    INFO("size " << n);
    errno = 0;
    void* p = std::calloc(1, opaque(n));
    CHECK(p == nullptr);
    CHECK(errno == ENOMEM);
    std::free(p);
  }
}

TEST_CASE("realloc-huge-keeps-block")
{
  for (size_t n : huge_sizes)
  {
    INFO("size " << n);
    void* p = std::malloc(opaque(100));
    REQUIRE(p != nullptr);
    stamp(p, 100, n);
    errno = 0;
    void* q = std::realloc(p, opaque(n));
    CHECK(q == nullptr);
    CHECK(errno == ENOMEM);
    // The failed realloc leaves the block allocated and unchanged.
    CHECK(stamp_intact(p, 100, n));
    std::free(p);

    errno = 0;
    CHECK(std::realloc(nullptr, opaque(n)) == nullptr);
    CHECK(errno == ENOMEM);
  }
}

TEST_CASE("aligned-huge")
{
  for (size_t n : huge_sizes)
  {
    for (size_t align : {size_t(16), size_t(4096), size_t(1) << 20})
    {
      INFO("size " << n << " align " << align);
      errno = 0;
      CHECK(memalign(opaque(align), opaque(n)) == nullptr);
      CHECK(errno == ENOMEM);
      errno = 0;
      CHECK(aligned_alloc(opaque(align), opaque(n)) == nullptr);
      CHECK(errno == ENOMEM);
      void* p = &n;
      CHECK(posix_memalign(&p, opaque(align), opaque(n)) == ENOMEM);
      CHECK(p == &n);
      CHECK(snmalloc::alloc_aligned(opaque(align), opaque(n)) == nullptr);
    }
    errno = 0;
    CHECK(valloc(opaque(n)) == nullptr);
    CHECK(errno == ENOMEM);
    errno = 0;
    CHECK(pvalloc(opaque(n)) == nullptr);
    CHECK(errno == ENOMEM);
  }
}

TEST_CASE("huge-alignment")
{
  // An alignment as large as the address space cannot be met.
  for (size_t align : {size_t(1) << 47, size_t(1) << 62, size_t(1) << 63})
  {
    INFO("align " << align);
    errno = 0;
    CHECK(memalign(opaque(align), 16) == nullptr);
    CHECK(errno == ENOMEM);
    errno = 0;
    CHECK(aligned_alloc(opaque(align), 16) == nullptr);
    CHECK(errno == ENOMEM);
    void* p = nullptr;
    CHECK(posix_memalign(&p, opaque(align), 16) == ENOMEM);
    CHECK(snmalloc::alloc_aligned(opaque(align), 16) == nullptr);
  }
}

TEST_CASE("snmalloc-alloc-huge")
{
  for (size_t n : huge_sizes)
  {
    INFO("size " << n);
    CHECK(snmalloc::alloc(opaque(n)) == nullptr);
  }
}

TEST_CASE("operator-new-huge-throws")
{
  for (size_t n : huge_sizes)
  {
    INFO("size " << n);
    CHECK_THROWS_AS(::operator new(opaque(n)), std::bad_alloc);
    CHECK_THROWS_AS(::operator new[](opaque(n)), std::bad_alloc);
    CHECK_THROWS_AS(
      ::operator new(opaque(n), std::align_val_t(64)), std::bad_alloc);
    CHECK_THROWS_AS(
      ::operator new[](opaque(n), std::align_val_t(4096)), std::bad_alloc);
  }
}

TEST_CASE("operator-new-nothrow-huge-returns-null")
{
  for (size_t n : huge_sizes)
  {
    INFO("size " << n);
    CHECK(::operator new(opaque(n), std::nothrow) == nullptr);
    CHECK(::operator new[](opaque(n), std::nothrow) == nullptr);
    CHECK(
      ::operator new(opaque(n), std::align_val_t(64), std::nothrow) ==
      nullptr);
    CHECK(
      ::operator new[](opaque(n), std::align_val_t(4096), std::nothrow) ==
      nullptr);
  }
}

TEST_CASE("allocation-works-after-huge-failures")
{
  // Failed requests must leave no state behind that breaks later ones.
  for (size_t n : huge_sizes)
    CHECK(std::malloc(opaque(n)) == nullptr);
  for (size_t n : {size_t(16), size_t(5000), size_t(1) << 20})
  {
    void* p = std::malloc(opaque(n));
    REQUIRE(p != nullptr);
    CHECK(whole_range_writable(p, n));
    std::free(p);
  }
}
