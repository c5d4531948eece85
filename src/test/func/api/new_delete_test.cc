// operator new and delete in all their forms: plain, array, nothrow, sized,
// aligned, and the new-handler protocol.
#include "support/alloc_checks.h"

#include <catch2/catch.hpp>
#include <cstdint>
#include <malloc.h>
#include <memory>
#include <new>
#include <set>
#include <snmalloc/snmalloc.h>
#include <vector>

using namespace snmalloc_test;

namespace
{
  const size_t new_sizes[] = {
    0, 1, 8, 24, 100, 1000, 4096, 20000, 65536, 65537, 200000, 1 << 22};

  struct alignas(256) OverAligned
  {
    unsigned char bytes[300];
  };

  // Counts constructions and destructions, so array new/delete is seen to
  // run every element's constructor and destructor.
  struct Counted
  {
    static inline int alive = 0;
    uint64_t payload[5];
    Counted()
    {
      alive++;
      for (auto& word : payload)
        word = 0x5eed;
    }
    ~Counted()
    {
      alive--;
    }
  };
}

TEST_CASE("operator-new-delete-all-forms")
{
  for (size_t n : new_sizes)
  {
    INFO("size " << n);
    void* p;

    p = ::operator new(opaque(n));
    CHECK(malloc_usable_size(p) >= n);
    CHECK(whole_range_writable(p, n));
    ::operator delete(p);

    p = ::operator new(opaque(n));
    CHECK(whole_range_writable(p, n));
    ::operator delete(p, n);

    p = ::operator new[](opaque(n));
    CHECK(whole_range_writable(p, n));
    ::operator delete[](p);

    p = ::operator new[](opaque(n));
    CHECK(whole_range_writable(p, n));
    ::operator delete[](p, n);

    p = ::operator new(opaque(n), std::nothrow);
    REQUIRE(p != nullptr);
    CHECK(whole_range_writable(p, n));
    ::operator delete(p, std::nothrow);

    p = ::operator new[](opaque(n), std::nothrow);
    REQUIRE(p != nullptr);
    CHECK(whole_range_writable(p, n));
    ::operator delete[](p, std::nothrow);

    // new and free mix: all forms come from the one heap.
    p = ::operator new(opaque(n));
    std::free(p);
    p = std::malloc(opaque(n));
    ::operator delete(p);
  }
}

TEST_CASE("operator-new-zero-is-unique")
{
  std::set<void*> seen;
  std::vector<void*> live;
  for (int i = 0; i < 100; i++)
  {
    void* p = ::operator new(opaque(0));
    REQUIRE(seen.insert(p).second);
    live.push_back(p);
  }
  for (void* p : live)
    ::operator delete(p, size_t(0));
}

TEST_CASE("new-expressions")
{
  auto* counted = new Counted[opaque(37)];
  CHECK(Counted::alive == 37);
  delete[] counted;
  CHECK(Counted::alive == 0);

  auto single = std::make_unique<Counted>();
  CHECK(Counted::alive == 1);
  single.reset();
  CHECK(Counted::alive == 0);

  // Over-aligned types go through operator new(size_t, align_val_t).
  std::vector<std::unique_ptr<OverAligned>> aligned;
  for (int i = 0; i < 50; i++)
  {
    aligned.push_back(std::make_unique<OverAligned>());
    CHECK(is_aligned(aligned.back().get(), alignof(OverAligned)));
    CHECK(whole_range_writable(aligned.back().get(), sizeof(OverAligned)));
  }
  auto* aligned_array = new OverAligned[opaque(9)];
  CHECK(is_aligned(aligned_array, alignof(OverAligned)));
  delete[] aligned_array;
}

namespace
{
  int new_handler_calls = 0;

  void give_up_handler()
  {
    new_handler_calls++;
    std::set_new_handler(nullptr);
  }
}

TEST_CASE("new-handler-called-on-failure")
{
  // operator new calls the installed handler when it cannot allocate, then
  // retries; with no handler left it throws std::bad_alloc.
  new_handler_calls = 0;
  std::set_new_handler(give_up_handler);
  CHECK_THROWS_AS(::operator new(opaque(SIZE_MAX)), std::bad_alloc);
  CHECK(new_handler_calls == 1);

  new_handler_calls = 0;
  std::set_new_handler(give_up_handler);
  CHECK_THROWS_AS(
    ::operator new(opaque(SIZE_MAX), std::align_val_t(64)), std::bad_alloc);
  CHECK(new_handler_calls == 1);

  new_handler_calls = 0;
  std::set_new_handler(give_up_handler);
  CHECK(::operator new(opaque(SIZE_MAX), std::nothrow) == nullptr);
  CHECK(new_handler_calls == 1);
  std::set_new_handler(nullptr);
}

namespace
{
  void throwing_handler()
  {
    new_handler_calls++;
    throw std::bad_alloc();
  }
}

TEST_CASE("nothrow-new-returns-null-when-the-handler-throws")
{
  // The nothrow forms return nullptr where the throwing form would throw,
  // the handler's own exception included.
  new_handler_calls = 0;
  std::set_new_handler(throwing_handler);
  CHECK(::operator new(opaque(SIZE_MAX / 2), std::nothrow) == nullptr);
  CHECK(::operator new[](opaque(SIZE_MAX / 2), std::nothrow) == nullptr);
  CHECK(::operator new(opaque(SIZE_MAX / 2), std::align_val_t(256), std::nothrow) == nullptr);
  CHECK(new_handler_calls == 3);
  CHECK_THROWS_AS(::operator new(opaque(SIZE_MAX / 2)), std::bad_alloc);
  CHECK(new_handler_calls == 4);
  std::set_new_handler(nullptr);
}
