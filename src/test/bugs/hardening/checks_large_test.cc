// The checks build (SNMALLOC_CHECKS=ON) against bugs of large objects and
// far writes: overflows and underflows of a large object, directly and
// through memcpy, writes after its free (with other large objects
// allocated since, which may take its place), and writes far past small
// and medium objects into memory the allocator has not handed out.  Each
// runs in a forked child that must be stopped, by a fault or by the
// checks' one line and abort(); nothing may let it run on.  A freed large
// object's address must also not come back at once.
#include "support/alloc_checks.h"
#include "support/death.h"

#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <signal.h>
#include <string>
#include <snmalloc/snmalloc.h>
#include <vector>

using namespace snmalloc_test;

namespace
{
  constexpr size_t KiB = 1024;
  constexpr size_t MiB = 1024 * KiB;

  // Page multiples, as the large objects of most programs are (buffers of
  // 2^n bytes), from just past the largest small class to several MiB.
  const size_t large_sizes[] = {68 * KiB, 256 * KiB, 1 * MiB, 1 * MiB + 4 * KiB, 5 * MiB};
  const ptrdiff_t distances[] = {1, 32, ptrdiff_t(MiB)};

  char source[2 * MiB];

  // `at` bytes past p, or further by steps of 1 MiB while that lands in a
  // slab, whose free slots are as accessible as its objects: memory handed
  // out there is no bug the checks build can see.  A slab of 1 MiB can lie
  // 1 MiB past a small object, as that of Catch2's signal stack does on a
  // CPU whose SIGSTKSZ is near 48 KiB (with AMX).
  ptrdiff_t past_slabs(const char* p, ptrdiff_t at)
  {
    for (;; at += ptrdiff_t(MiB))
    {
      uintptr_t owner = snmalloc::pagemap.entry_of(p + at).get_owner();
      if (owner == 0 || snmalloc::is_tag(owner))
        return at;
    }
  }

  void poke(void* p, ptrdiff_t at)
  {
    static_cast<volatile char*>(hide(p))[at] ^= 'A';
  }

  size_t env_number(const char* name)
  {
    const char* v = std::getenv(name);
    return v == nullptr ? 0 : std::strtoull(v, nullptr, 10);
  }

  // The bug runs in a fresh process, as a small program that commits it
  // would: this executable again, running the hidden case below, which
  // allocates an object of `size` bytes, touches its first and last byte,
  // then commits bug `bug` at `at` bytes from its start (or from its end,
  // where `from_end`).  It must be stopped, by a fault or by abort() after
  // a check; nothing may let it run on.
  void check_stopped(const char* bug, size_t size, ptrdiff_t at, bool from_end = false)
  {
    INFO(bug << ": size " << size << ", at " << at << (from_end ? " from the end" : ""));
    ChildEnd end = run_in_child([&] {
      ::setenv("BUG", bug, 1);
      ::setenv("BUG_SIZE", std::to_string(size).c_str(), 1);
      ::setenv("BUG_AT", std::to_string(from_end ? ptrdiff_t(size) + at : at).c_str(), 1);
      ::execl("/proc/self/exe", "child", "commit the bug of the environment", static_cast<char*>(nullptr));
      ::_exit(127);
    });
    INFO("exit code " << end.exit_code << ", stderr: " << end.stderr_text);
    CHECK((end.signal == SIGSEGV || end.signal == SIGBUS || end.signal == SIGABRT));
  }
} // namespace

TEST_CASE("commit the bug of the environment", "[.]")
{
  if (std::getenv("BUG") == nullptr)
    return;
  std::string bug = std::getenv("BUG");
  size_t size = env_number("BUG_SIZE");
  auto at = static_cast<ptrdiff_t>(std::strtoll(std::getenv("BUG_AT"), nullptr, 10));
  char* p = static_cast<char*>(std::malloc(size));
  poke(p, 0);
  poke(p, ptrdiff_t(size) - 1);
  if (bug == "write")
    poke(p, at);
  else if (bug == "write-far")
    poke(p, past_slabs(p, at));
  else if (bug == "memcpy-to")
    std::memcpy(hide(p + at), source, 64 + size_t(at < 0 ? -at : at - ptrdiff_t(size) + 64));
  else if (bug == "write-after-free")
  {
    std::free(p);
    poke(p, at);
  }
  else if (bug == "write-after-free-and-reuse")
  {
    // Objects of the same and of other sizes, which could take its place.
    std::free(p);
    for (size_t other : large_sizes)
    {
      escape(std::malloc(size));
      escape(std::malloc(other));
    }
    poke(p, at);
  }
  ::_exit(0);
}

TEST_CASE("a write just past or before a large object is stopped", "[checks]")
{
  for (size_t size : large_sizes)
    for (ptrdiff_t distance : distances)
    {
      check_stopped("write", size, distance - 1, true);
      check_stopped("write", size, -distance);
    }
}

TEST_CASE("a memcpy that runs past or starts before a large object is stopped", "[checks]")
{
  for (size_t size : large_sizes)
    for (ptrdiff_t distance : distances)
    {
      check_stopped("memcpy-to", size, distance - 64, true);
      check_stopped("memcpy-to", size, -distance);
    }
}

TEST_CASE("a write to a freed large object is stopped, also after others are allocated", "[checks]")
{
  for (size_t size : large_sizes)
  {
    check_stopped("write-after-free", size, ptrdiff_t(size / 2));
    check_stopped("write-after-free-and-reuse", size, 0);
  }
}

TEST_CASE("a write 1 MiB past a small or medium object is stopped", "[checks]")
{
  for (size_t size : {size_t(8), size_t(256), size_t(4 * KiB), size_t(32 * KiB)})
    check_stopped("write-far", size, ptrdiff_t(MiB));
}

TEST_CASE("a freed large object's address is not handed out again at once", "[checks]")
{
  for (size_t size : large_sizes)
  {
    INFO("size " << size);
    void* last = nullptr;
    void* before_last = nullptr;
    for (int i = 0; i < 8; i++)
    {
      void* p = std::malloc(size);
      REQUIRE(p != nullptr);
      CHECK(p != last);
      CHECK(p != before_last);
      std::free(p);
      before_last = last;
      last = p;
    }
    // Within a realloc as well: the object moves, its old run is freed.
    void* p = std::malloc(size);
    void* q = std::realloc(p, size + 64 * KiB);
    REQUIRE(q != nullptr);
    void* r = std::malloc(size);
    CHECK(r != p);
    std::free(q);
    std::free(r);
  }
}

TEST_CASE("a large object keeps working: every byte, realloc both ways, calloc", "[checks]")
{
  for (size_t size : {size_t(64 * KiB + 1), size_t(100000), 300 * KiB + 17, 3 * MiB + 5})
  {
    INFO("size " << size);
    auto* p = static_cast<unsigned char*>(std::malloc(size));
    REQUIRE(p != nullptr);
    CHECK(snmalloc::alloc_size(p) >= size);
    std::memset(p, 7, snmalloc::alloc_size(p));
    p = static_cast<unsigned char*>(std::realloc(p, size * 2));
    REQUIRE(p != nullptr);
    CHECK(p[0] == 7);
    CHECK(p[size - 1] == 7);
    std::memset(p, 8, size * 2);
    p = static_cast<unsigned char*>(std::realloc(p, size / 2 + 70 * KiB));
    REQUIRE(p != nullptr);
    CHECK(p[size / 2 + 70 * KiB - 1] == 8);
    std::free(p);
    auto* z = static_cast<unsigned char*>(std::calloc(1, size));
    REQUIRE(z != nullptr);
    bool zero = true;
    for (size_t i = 0; i < size; i++)
      zero &= z[i] == 0;
    CHECK(zero);
    std::free(z);
  }
}
