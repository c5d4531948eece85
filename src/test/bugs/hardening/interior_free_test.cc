// A 16-byte aligned pointer into a live small object, freed by the thread
// that owns the object's slab, must stop the program with the interior
// pointer line before any malloc returns memory overlapping a live object.
// (Pushed onto the slab's free list, such a pointer was handed out again
// by a later malloc of its class while the object around it was live.)
// The program keeps its object and allocates more of the same class,
// which hands the slab's list to the thread again.  Each case runs in a
// forked child that reports an overlapping object instead of dying if
// one comes out.
#include "support/death.h"

#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

using namespace snmalloc_test;

namespace
{
  // Where in the order of the program's frees the bad one comes.
  enum class When
  {
    First,
    Middle,
    Last,
  };

  // Enough objects of `size` to fill a few slabs of its class (a slab holds
  // at least a dozen objects, of 16 KiB or more).
  size_t objects_for(size_t size)
  {
    size_t n = (256 * 1024) / size;
    return n < 64 ? 64 : n;
  }

  bool overlaps(const void* a, const void* b, size_t size)
  {
    auto x = reinterpret_cast<uintptr_t>(a);
    auto y = reinterpret_cast<uintptr_t>(b);
    return x < y + size && y < x + size;
  }

  // In the child: allocate `n` objects of `size`, keep `live` and every
  // fourth one (so no slab is ever all free, which would be checked when
  // it is released), free the rest with `live + by` among them, then
  // allocate as many again, writing each, and keep the new ones.  Every
  // object handed out is compared with the live ones of its class.
  template<typename Tell>
  void free_interior_then_allocate(Tell tell, size_t size, size_t by, When when)
  {
    size_t n = objects_for(size);
    std::vector<char*> v(n);
    for (auto& p : v)
      p = static_cast<char*>(std::malloc(size));
    size_t live_index = n / 2 + 1;
    char* live = v[live_index];
    void* interior = offset(live, by);
    tell(interior);
    std::vector<size_t> freed;
    for (size_t i = 0; i < n; i++)
    {
      if (i % 4 != 0 && i != live_index)
        freed.push_back(i);
    }
    size_t bad_at = when == When::First ? 0 : when == When::Middle ? freed.size() / 2 : freed.size();
    for (size_t k = 0; k <= freed.size(); k++)
    {
      if (k == bad_at)
        std::free(interior);
      if (k < freed.size())
      {
        std::free(v[freed[k]]);
        v[freed[k]] = nullptr;
      }
    }
    std::vector<char*> again;
    for (size_t j = 0; j < 2 * n; j++)
    {
      char* q = static_cast<char*>(std::malloc(size));
      for (char* kept : v)
      {
        if (kept != nullptr && overlaps(q, kept, size))
        {
          std::fprintf(stderr, "malloc(%zu) returned %p overlapping the live %p\n", size, q, kept);
          ::_exit(3);
        }
      }
      q[0] = 1;
      q[size - 1] = 1;
      again.push_back(q);
    }
    std::fprintf(stderr, "not caught\n");
    ::_exit(4);
  }
} // namespace

TEST_CASE("interior free on the owner thread is caught before reuse", "[bad-free]")
{
  for (size_t size : {32, 48, 256, 1024, 3072, 12288, 65536})
  {
    for (size_t by : {size_t(16), size / 2 / 16 * 16, size - 16})
    {
      for (When when : {When::First, When::Middle, When::Last})
      {
        CAPTURE(size, by, int(when));
        check_dies_naming(
          [size, by, when](auto tell) { free_interior_then_allocate(tell, size, by, when); },
          "interior pointer");
      }
    }
  }
}
