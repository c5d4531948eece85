// glibc's functions about the heap (mallinfo2, mallinfo, malloc_trim,
// malloc_stats) answered for this allocator's heap, against what the test
// holds and the process's resident set.
#include "support/alloc_checks.h"

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <malloc.h>
#include <snmalloc/snmalloc.h>
#include <snmalloc/snmalloc_stats.h>
#include <string>
#include <unistd.h>
#include <vector>

using namespace snmalloc_test;

namespace
{
  constexpr size_t MiB = size_t(1) << 20;

  struct Held
  {
    std::vector<void*> blocks;
    size_t usable = 0;

    void take(size_t size)
    {
      void* p = std::malloc(size);
      REQUIRE(p != nullptr);
      std::memset(p, 0x3c, size);
      escape(p);
      usable += ::malloc_usable_size(p);
      blocks.push_back(p);
    }

    void release()
    {
      for (void* p : blocks)
        std::free(p);
      blocks.clear();
      usable = 0;
    }

    ~Held()
    {
      release();
    }
  };

  // What malloc_stats wrote to stderr.
  std::string stderr_of_malloc_stats()
  {
    char path[] = "/tmp/snmalloc-malloc-stats-XXXXXX";
    int fd = ::mkstemp(path);
    REQUIRE(fd >= 0);
    ::unlink(path);
    std::fflush(stderr);
    int saved = ::dup(STDERR_FILENO);
    ::dup2(fd, STDERR_FILENO);
    ::malloc_stats();
    ::dup2(saved, STDERR_FILENO);
    ::close(saved);
    char text[2048] = {};
    ssize_t n = ::pread(fd, text, sizeof(text) - 1, 0);
    ::close(fd);
    return n > 0 ? std::string(text, size_t(n)) : std::string();
  }
} // namespace

TEST_CASE("mallinfo2 and mallinfo count what is held")
{
  struct mallinfo2 before = ::mallinfo2();
  Held small, large;
  // Sizes of many classes, none large; then large runs of uneven sizes.
  for (size_t i = 0; i < 3000; i++)
    small.take(24 + (i * 7919) % 9000);
  for (size_t size : {MiB, 3 * MiB + 12345, size_t(600 * 1024 + 1)})
    large.take(size);
  struct mallinfo2 held = ::mallinfo2();
  struct snmalloc_stats s;
  REQUIRE(snmalloc_stats(&s) == 0);

  INFO("small held " << small.usable << ", large held " << large.usable);
  // Large runs are glibc's mmapped chunks, counted exactly.
  CHECK(held.hblks - before.hblks == 3);
  CHECK(held.hblkhd - before.hblkhd == large.usable);
  // Small objects: at least what is held, and at most a refill's batch
  // more in each class touched (they wait in this thread's fast lists).
  CHECK(held.uordblks - before.uordblks >= small.usable);
  CHECK(held.uordblks - before.uordblks <= small.usable + 4 * MiB);
  // The heap's memory, arena and large runs, holds what is live, and the
  // process holds it resident: every byte held was written (the checks
  // build's guard pages are in the arena, never resident).
  CHECK(held.arena >= held.uordblks);
  CHECK(held.arena + held.hblkhd == s.resident_bytes);
  CHECK(held.uordblks + held.hblkhd <= resident_bytes() + 4 * MiB);

  // Deprecated by glibc (its int fields wrap), still called by programs.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  struct mallinfo old = ::mallinfo();
#pragma GCC diagnostic pop
  CHECK(size_t(old.hblks) == held.hblks);
  CHECK(size_t(old.hblkhd) == held.hblkhd);
  CHECK(size_t(old.uordblks) - before.uordblks >= small.usable);

  large.release();
  struct mallinfo2 freed = ::mallinfo2();
  CHECK(freed.hblks == before.hblks);
  CHECK(freed.hblkhd == before.hblkhd);
}

TEST_CASE("malloc_trim gives freed pages back")
{
  // A large block touched whole, then freed: its pages stay resident until
  // their decay (the checks build's quarantine keeps them too), or until
  // malloc_trim.
  const size_t size = 96 * MiB;
  void* p = std::malloc(size);
  REQUIRE(p != nullptr);
  std::memset(p, 0x5a, size);
  escape(p);
  size_t touched = resident_bytes();
  std::free(p);
  size_t after_free = resident_bytes();
  int released = ::malloc_trim(0);
  size_t after_trim = resident_bytes();
  INFO("resident: touched " << touched << ", freed " << after_free << ", trimmed " << after_trim);
  CHECK(after_free + size / 2 > touched);
  CHECK(after_trim + size / 2 <= touched);
  CHECK(released == 1);
  CHECK(::malloc_trim(0) == 0);
}

TEST_CASE("malloc_trim releases the slabs kept empty")
{
  // Sizes of classes nothing else here uses, of one-chunk slabs and larger:
  // once all their objects are back, the last slab of each class is kept
  // for its next refill, until malloc_trim.
  for (size_t size : {size_t(7000), size_t(28000)})
  {
    size_t sc = snmalloc::size_to_sizeclass(size);
    auto slabs = [sc] {
      struct snmalloc_stats s;
      snmalloc_stats(&s);
      return s.sizeclasses[sc].slabs;
    };
    {
      Held held;
      for (size_t i = 0; i < 200; i++)
        held.take(size);
    }
    INFO("size " << size << ", slab of " << (size_t(1) << snmalloc::sizeclasses.slab_bits[sc]));
    CHECK(slabs() >= 1);
    ::malloc_trim(0);
    CHECK(slabs() == 0);
  }
}

TEST_CASE("malloc_stats prints this heap")
{
  Held held;
  for (size_t i = 0; i < 200; i++)
    held.take(5 * MiB / 200);
  std::string text = stderr_of_malloc_stats();
  INFO(text);
  const char* live = std::strstr(text.c_str(), "live bytes      =");
  REQUIRE(live != nullptr);
  unsigned long long bytes = std::strtoull(live + std::strlen("live bytes      ="), nullptr, 10);
  CHECK(bytes >= held.usable);
  CHECK(std::strstr(text.c_str(), "resident bytes <=") != nullptr);
}
