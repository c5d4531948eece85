// The checks build's memcpy family bounds sampled objects as it bounds
// the others (profiling and checks builds): a sampled object lives in the
// profile pool, whose blocks hold a record before the object, and a
// pointer anywhere into the object finds its start and size.  Each child
// samples every allocation (rate 1) on a fresh thread, writes in bounds,
// then one byte past the end through an interior pointer.
#include "support/death.h"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <cstring>
#include <malloc.h>
#include <snmalloc/snmalloc.h>
#include <thread>

using namespace snmalloc_test;

namespace
{
  struct Told
  {
    char* object;
    size_t usable;
  };

  // The child's end, and what it told of its object before it.
  Told overflow_in_child(size_t alignment, size_t size, size_t offset, ChildEnd& end)
  {
    int fds[2];
    REQUIRE(::pipe(fds) == 0);
    end = run_in_child([&] {
      ::close(fds[0]);
      snmalloc::profile::start(1);
      std::thread([&] {
        auto* p = static_cast<char*>(alignment == 0 ? std::malloc(size) : std::aligned_alloc(alignment, size));
        Told told{p, malloc_usable_size(p)};
        (void)!::write(fds[1], &told, sizeof(told));
        std::memset(p, 1, told.usable);
        std::memcpy(p + offset, p, told.usable - offset);
        std::memset(hide(p + offset), 0, told.usable - offset + 1);
      }).join();
      ::_exit(3); // not caught
    });
    ::close(fds[1]);
    Told told{};
    CHECK(::read(fds[0], &told, sizeof(told)) == sizeof(told));
    ::close(fds[0]);
    return told;
  }
} // namespace

TEST_CASE("the memcpy family bounds sampled objects from interior pointers", "[checks][sampled]")
{
  struct Case
  {
    size_t alignment, size, offset;
  };
  // Small, aligned (the record further into its block than its start),
  // and large (a chunk run with the record elsewhere).
  for (Case c : {Case{0, 64, 16}, Case{256, 100, 48}, Case{0, 256 * 1024, 4096}})
  {
    INFO("alignment " << c.alignment << ", size " << c.size << ", offset " << c.offset);
    ChildEnd end;
    Told told = overflow_in_child(c.alignment, c.size, c.offset, end);
    REQUIRE(told.usable >= c.size);
    char expected[200];
    std::snprintf(expected, sizeof(expected),
      "snmalloc: fatal: memset(): %zu bytes written at %p overflow the %zu-byte heap object at %p\n",
      told.usable - c.offset + 1, static_cast<void*>(told.object + c.offset), told.usable,
      static_cast<void*>(told.object));
    CHECK(end.signal == SIGABRT);
    CHECK(end.stderr_text == expected);
  }
}
