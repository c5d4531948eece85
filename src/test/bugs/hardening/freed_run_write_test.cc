// A write into a large object after its free, anywhere in its first eight
// bytes, must stop the program, at the latest when the memory is handed
// out again or its pages go back to the kernel: before the next owner of
// those bytes gets a block the old owner scribbled on.  The default build
// stops it then, with one line that names the freed object's address; the
// checks build, whose freed runs are inaccessible, stops it at the write
// (SIGSEGV).  Each case runs in a forked child, which reports an
// allocation that covered the freed object unnoticed (exit code COVERED)
// instead of dying.  The same holds whatever was freed around the object,
// before or after, what size is allocated next, and whether realloc had
// moved the object by remapping its pages.  Programs without the bug must
// never be stopped, and calloc's blocks read as zero.
#include "support/death.h"

#include <catch2/catch.hpp>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <malloc.h>
#include <snmalloc/snmalloc.h>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace snmalloc_test;

namespace
{
  constexpr int COVERED = 4;
  constexpr int NO_ROW = 7;
  constexpr int NOT_MOVED = 8;

  // Large objects only: past the largest small class, of one chunk or of
  // many, a power of two or not, up to past realloc's threshold for
  // remapping pages.
  const size_t sizes[] = {
    snmalloc::config::MAX_SMALL_SIZE + 1, 100000, 256 * 1024, (1 << 20) + 16384, 3 << 20, 5 << 20};

  enum class Scribble
  {
    FirstWord,
    OneByte,
    SixtyFour,
    FirstPage,
  };

  void scribble(char* p, Scribble how)
  {
    volatile char* v = static_cast<char*>(hide(p));
    switch (how)
    {
      case Scribble::FirstWord:
        *reinterpret_cast<volatile uint64_t*>(v) = 0;
        break;
      case Scribble::OneByte:
        v[3] ^= 0x20;
        break;
      case Scribble::SixtyFour:
        for (size_t i = 0; i < 64; i++)
          v[i] = 0x41;
        break;
      case Scribble::FirstPage:
        std::memset(p, 0x5a, 4096);
        break;
    }
  }

  // What the program does around its bug.
  enum class Order
  {
    Alone, // free, write, allocate the size again
    BeforeFreedFirst, // the object allocated just before it was freed first
    AfterFreedToo, // the object allocated just after it is freed after it
    SmallerNext, // the next allocations are of half the size
    LargerNext, // the one after it freed too, then twice the size
    ReallocMoved, // not freed: realloc moved it, to twice the size and more
  };

  bool covers(const char* q, size_t size, const char* p)
  {
    return q != nullptr && q <= p && p < q + size;
  }

  // Blocks of `size` side by side (`count` of them, three in a Row), and
  // one more after them, so that what the frees below leave free is
  // bounded: else best fit may place the next blocks elsewhere first.  The
  // blocks of tries that came apart stay allocated (the next tries go past
  // them).  The checks build puts guard pages between blocks, and its
  // freed ones fault wherever they lie: any blocks do.
  struct Row
  {
    char* before;
    char* p;
    char* after;
  };

  std::vector<char*> side_by_side(size_t size, size_t count)
  {
    for (int tries = 0; tries < 16; tries++)
    {
      std::vector<char*> row(count);
      bool adjacent = true;
      for (size_t i = 0; i < count; i++)
      {
        row[i] = static_cast<char*>(std::malloc(size));
        adjacent = adjacent && (i == 0 || row[i] == row[i - 1] + malloc_usable_size(row[i - 1]));
      }
      if ((adjacent || snmalloc::config::checks) && std::malloc(size) != nullptr)
        return row;
    }
    ::_exit(NO_ROW);
  }

  Row row_of(size_t size)
  {
    std::vector<char*> row = side_by_side(size, 3);
    return {row[0], row[1], row[2]};
  }

  // Up to 64 allocations of `size`: exit with COVERED at the first that
  // covers p, with 0 if none does.
  [[noreturn]] void allocate_until_covered(size_t size, const char* p)
  {
    for (int i = 0; i < 64; i++)
    {
      char* q = static_cast<char*>(std::malloc(size));
      if (covers(q, size, p))
        ::_exit(COVERED);
    }
    ::_exit(0);
  }

  // In the child: the bug, then allocations until one covers the freed
  // object (COVERED) or 64 have not (exit 0).
  template<typename Tell>
  void write_after_free(Tell tell, size_t size, Scribble how, Order order)
  {
    auto [before, p, after] = row_of(size);
    std::memset(p, 0x11, size);
    tell(p);
    if (order == Order::BeforeFreedFirst)
      std::free(before);
    if (order == Order::ReallocMoved)
    {
      // Its neighbours are live, and the checks build's guard after it is
      // at most 1 MiB: it cannot grow in place.  (Past 4 MiB its pages
      // move by remapping, and the old block reads as zero.)
      if (std::realloc(p, size * 2 + (2 << 20)) == p)
        ::_exit(NOT_MOVED);
    }
    else
      std::free(p);
    if (order == Order::AfterFreedToo || order == Order::LargerNext)
      std::free(after);
    scribble(p, how);
    size_t next = order == Order::LargerNext ? size * 2 : size;
    if (order == Order::SmallerNext && size / 2 > snmalloc::config::MAX_SMALL_SIZE)
      next = size / 2;
    allocate_until_covered(next, p);
  }

  // The child runs `bug(tell)`, which tells the freed object's address: it
  // must be stopped, and the line must name that address.
  template<typename Bug>
  void expect_stopped_by(Bug bug)
  {
    auto [end, p] = run_telling(bug);
    INFO("child's stderr: " << end.stderr_text);
    REQUIRE(end.exit_code != NO_ROW);
    REQUIRE(end.exit_code != NOT_MOVED);
    CHECK(end.exit_code != COVERED);
    if (snmalloc::config::checks)
    {
      CHECK(end.signal == SIGSEGV);
      return;
    }
    CHECK(end.signal == SIGABRT);
    CHECK(end.stderr_text == fatal_line("freed memory written (write after free?) at", p, ""));
  }

  void expect_stopped(size_t size, Scribble how, Order order)
  {
    INFO("size " << size << ", scribble " << int(how) << ", order " << int(order));
    expect_stopped_by([&](auto tell) { write_after_free(tell, size, how, order); });
  }

  // Every size, with each of `hows` and `orders`.
  void expect_stopped_all(std::initializer_list<Scribble> hows, std::initializer_list<Order> orders)
  {
    for (size_t size : sizes)
      for (Scribble how : hows)
        for (Order order : orders)
          expect_stopped(size, how, order);
  }
}

TEST_CASE("a write after free at a large object's start stops the program", "[freed-run]")
{
  expect_stopped_all(
    {Scribble::FirstWord, Scribble::OneByte, Scribble::SixtyFour, Scribble::FirstPage}, {Order::Alone});
}

TEST_CASE("so does one whose neighbours were freed around it", "[freed-run]")
{
  expect_stopped_all({Scribble::SixtyFour}, {Order::BeforeFreedFirst, Order::AfterFreedToo});
}

// Blocks freed one after another in address order merge into one free
// block: a write into any of them between its free and the next ones'.
TEST_CASE("so does one whose neighbours were freed after it, one by one", "[freed-run]")
{
  constexpr size_t count = 8;
  for (size_t size : sizes)
    for (size_t victim : {size_t(0), size_t(2), size_t(4), count - 1})
    {
      INFO("size " << size << ", block " << victim << " of " << count);
      expect_stopped_by([&](auto tell) {
        std::vector<char*> row = side_by_side(size, count);
        for (char* b : row)
          std::memset(b, 0x11, size);
        tell(row[victim]);
        for (size_t i = 0; i < count; i++)
        {
          std::free(row[i]);
          if (i == victim)
            scribble(row[i], Scribble::FirstWord);
        }
        allocate_until_covered(size, row[victim]);
      });
    }
}

TEST_CASE("so does a write through the pointer realloc moved it from", "[freed-run]")
{
  expect_stopped_all({Scribble::FirstWord, Scribble::SixtyFour}, {Order::ReallocMoved});
}

// The block realloc moved it to, then freed: moved by remapping its pages
// from 5 MiB (realloc remaps a block of 4 MiB or more), by copying below.
TEST_CASE("so does a write into the block realloc moved it to, once freed", "[freed-run]")
{
  for (size_t size : sizes)
  {
    size_t grown = size * 2 + (2 << 20);
    INFO("size " << size << " grown to " << grown);
    expect_stopped_by([&](auto tell) {
      auto [before, p, after] = row_of(size);
      std::memset(p, 0x11, size);
      char* q = static_cast<char*>(std::realloc(p, grown));
      if (q == p)
        ::_exit(NOT_MOVED);
      tell(q);
      std::free(q);
      scribble(q, Scribble::SixtyFour);
      allocate_until_covered(grown, q);
    });
  }
}

// Left free until its pages go back to the kernel (a trim here, a decay
// otherwise), the write is seen as they go.
TEST_CASE("so does one into a block whose pages then go back", "[freed-run]")
{
  for (size_t size : sizes)
  {
    INFO("size " << size);
    expect_stopped_by([&](auto tell) {
      auto [before, p, after] = row_of(size);
      std::memset(p, 0x11, size);
      tell(p);
      std::free(p);
      scribble(p, Scribble::FirstWord);
      snmalloc::trim();
      allocate_until_covered(size, p);
    });
  }
}

TEST_CASE("so does one whose memory goes to a smaller or larger object", "[freed-run]")
{
  expect_stopped_all({Scribble::FirstWord}, {Order::SmallerNext, Order::LargerNext});
}

// A crash reporter's SIGABRT handler may allocate, large blocks too: the
// allocator reports the write once its backend's lock is released.  (The
// child's alarm ends a handler that waits for it.)
TEST_CASE("a SIGABRT handler that allocates runs to its end", "[freed-run]")
{
  if (snmalloc::config::checks)
    return; // there, the write itself faults
  constexpr int HANDLER_RAN = 9;
  auto [end, p] = run_telling([](auto tell) {
    ::alarm(20);
    ::signal(SIGABRT, [](int) {
      void* large = std::malloc(3 << 20);
      void* small = std::malloc(48);
      ::_exit(large != nullptr && small != nullptr ? HANDLER_RAN : 10);
    });
    write_after_free(tell, 256 * 1024, Scribble::SixtyFour, Order::Alone);
  });
  INFO("child's stderr: " << end.stderr_text);
  CHECK(end.signal == 0);
  CHECK(end.exit_code == HANDLER_RAN);
  CHECK(end.stderr_text == fatal_line("freed memory written (write after free?) at", p, ""));
}

// Two threads replace random large blocks, grow and shrink them by
// realloc (moved, past 4 MiB, by remapping their pages where the kernel
// can), take some from calloc, and free them in any order; a byte in every 4093 of each is
// checked before it goes: the heap's own use of freed memory never trips
// the check, and calloc's blocks read as zero.
TEST_CASE("programs without the bug run to their end", "[freed-run]")
{
  ChildEnd end = run_in_child([] {
    auto work = [](uint64_t state) {
      auto next = [&] {
        state = state * 6364136223846793005 + 1442695040888963407;
        return state >> 33;
      };
      struct Block
      {
        unsigned char* p = nullptr;
        size_t size = 0;
        unsigned char fill = 0;
      };
      std::vector<Block> live(24);
      auto check = [](const Block& b) {
        for (size_t i = 0; i < b.size; i += 4093)
          if (b.p[i] != b.fill)
            ::_exit(5);
      };
      for (int op = 0; op < 1500; op++)
      {
        Block& b = live[next() % live.size()];
        size_t size = snmalloc::config::MAX_SMALL_SIZE + 1 + next() % (6 << 20);
        if (b.p != nullptr)
          check(b);
        size_t way = next() % 8;
        if (b.p != nullptr && way < 2)
        {
          // Grown or shrunk in place where it can be, moved where not.
          b.p = static_cast<unsigned char*>(std::realloc(b.p, size));
          if (size > b.size)
            std::memset(b.p + b.size, b.fill, size - b.size);
        }
        else if (way == 2)
        {
          std::free(b.p);
          b.p = static_cast<unsigned char*>(std::calloc(1, size));
          b.fill = 0;
        }
        else
        {
          std::free(b.p);
          b.p = static_cast<unsigned char*>(std::malloc(size));
          b.fill = static_cast<unsigned char>(next());
          std::memset(b.p, b.fill, size);
        }
        b.size = size;
        if (op % 500 == 499)
          snmalloc::trim();
      }
      for (Block& b : live)
      {
        check(b);
        std::free(b.p);
      }
    };
    std::thread other(work, 0x9e3779b97f4a7c15);
    work(12345);
    other.join();
  });
  INFO("child's stderr: " << end.stderr_text);
  CHECK(end.signal == 0);
  CHECK(end.exit_code == 0);
}

// Once the kernel has the pages back, the freed run reads as zero, and a
// block that covers it is not stopped.
TEST_CASE("a freed run whose pages went back is not reported", "[freed-run]")
{
  if (snmalloc::config::checks)
    return; // there, freed runs wait in quarantine
  for (size_t size : sizes)
  {
    auto [end, p] = run_telling([size](auto tell) {
      char* p = static_cast<char*>(std::malloc(size));
      std::memset(p, 0x11, size);
      tell(p);
      std::free(p);
      snmalloc::trim();
      for (int i = 0; i < 64; i++)
      {
        char* q = static_cast<char*>(std::malloc(size));
        if (covers(q, size, p))
          ::_exit(q[0] == 0 ? COVERED : 6);
      }
      ::_exit(0);
    });
    INFO("size " << size << ", child's stderr: " << end.stderr_text);
    CHECK(end.signal == 0);
    CHECK(end.exit_code == COVERED);
  }
}

// A block realloc moved by remapping its pages goes back with fresh pages
// and its mark: calloc over it, of its size or less, reads as zero.
TEST_CASE("calloc over a freed block that realloc moved reads as zero", "[freed-run]")
{
  ChildEnd end = run_in_child([] {
    for (size_t size : {size_t(5) << 20, size_t(9) << 20})
    {
      for (size_t again : {size * 3, size * 3 / 2, size_t(1) << 20, size_t(100000)})
      {
        auto [before, p, after] = row_of(size);
        std::memset(p, 0x77, size);
        char* q = static_cast<char*>(std::realloc(p, size * 3));
        if (q == p && !snmalloc::config::checks) // there, guarded runs may grow in place
          ::_exit(NOT_MOVED);
        std::memset(q, 0x77, size * 3);
        std::free(q);
        bool covered = false;
        std::vector<unsigned char*> taken;
        for (int i = 0; i < 1024 && !covered; i++) // small ones fill other gaps first
        {
          auto* z = static_cast<unsigned char*>(std::calloc(1, again));
          for (size_t at = 0; at < again; at += 4093)
            if (z[at] != 0)
              ::_exit(5);
          if (z[0] != 0 || z[again - 1] != 0)
            ::_exit(5);
          covered = covers(reinterpret_cast<char*>(z), again, q);
          taken.push_back(z);
        }
        if (!covered && !snmalloc::config::checks)
          ::_exit(COVERED + 10); // the test did not reach the case
        for (unsigned char* z : taken)
          std::free(z);
        std::free(before);
        std::free(after);
      }
    }
    ::_exit(0);
  });
  INFO("child's stderr: " << end.stderr_text);
  CHECK(end.signal == 0);
  CHECK(end.exit_code == 0);
}
