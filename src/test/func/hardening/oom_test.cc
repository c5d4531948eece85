// Out of memory: every entry point fails cleanly (NULL and ENOMEM, or
// std::bad_alloc), the profiler drops and counts its samples, and the
// program frees and continues.  The checks run in a child re-executed
// under RLIMIT_AS: the heap can take all that the limit leaves, and the
// child fills it with large blocks it never touches, so this costs address
// space, not memory.
#include "support/death.h"
#include "support/exhaust.h"

#include <catch2/catch.hpp>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <malloc.h>
#include <new>
#include <snmalloc/snmalloc_stats.h>
#include <pthread.h>
#include <semaphore.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

extern "C" uint64_t snmalloc_profile_samples_dropped(void) __attribute__((weak));

using snmalloc_test::hide;

namespace
{
  // What a re-executed child does before it runs: RLIMIT_AS at `bytes`.
  auto limit_address_space(rlim_t bytes)
  {
    return [bytes] {
      rlimit limit{bytes, bytes};
      if (::setrlimit(RLIMIT_AS, &limit) != 0)
        ::_exit(126);
    };
  }

  constexpr rlim_t LIMIT = rlim_t(4) << 30;
  constexpr size_t MiB = size_t(1) << 20;
  // A class no start-up code uses, so no cached free object serves it.
  constexpr size_t UNUSED_CLASS_SIZE = 50000;

  void* held[1 << 16];
  size_t held_count = 0;

  // Take every block there is, from 1 GiB down to one chunk.
  void exhaust()
  {
    held_count = snmalloc_test::exhaust(held, sizeof(held) / sizeof(held[0]), size_t(1) << 30,
      size_t(16) << 10, [](size_t size) { return std::malloc(size); });
  }

  void release()
  {
    while (held_count > 0)
      std::free(held[--held_count]);
  }

  // What went wrong while memory was exhausted, reported once it is not:
  // the test framework allocates to report.
  struct Problem
  {
    const char* what;
    size_t size;
  };
  Problem problems[256];
  size_t problem_count = 0;

  void note(bool ok, const char* what, size_t size)
  {
    if (!ok && problem_count < sizeof(problems) / sizeof(problems[0]))
      problems[problem_count++] = {what, size};
  }

  // The call returned NULL and set ENOMEM.
  template<typename F>
  void check_fails(const char* what, size_t size, F f)
  {
    errno = 0;
    void* p = f();
    note(p == nullptr && errno == ENOMEM, what, size);
    std::free(p);
  }

  template<typename F>
  void check_throws_bad_alloc(const char* what, size_t size, F f)
  {
    bool thrown = false;
    try
    {
      f();
    }
    catch (const std::bad_alloc&)
    {
      thrown = true;
    }
    note(thrown, what, size);
  }

  // A thread started before memory runs out (its stack is address space
  // the heap would otherwise take) makes its first call after.
  sem_t out_of_memory;

  void* first_call_on_thread(void*)
  {
    while (::sem_wait(&out_of_memory) != 0)
    {
    }
    check_fails("malloc, a thread's first call", MiB, [] { return std::malloc(MiB); });
    return nullptr;
  }

  // The main stack grown now: with the address space full it could not
  // grow, and the report of a failure would fault.
  __attribute__((noinline)) void grow_stack()
  {
    volatile char frame[512 << 10];
    std::memset(const_cast<char*>(frame), 0, sizeof(frame));
  }
} // namespace

TEST_CASE("out of memory (child)", "[.oom]")
{
  void* small = std::malloc(100);
  std::memset(small, 0x5a, 100);
  grow_stack();
  REQUIRE(::sem_init(&out_of_memory, 0, 0) == 0);
  pthread_t thread;
  REQUIRE(::pthread_create(&thread, nullptr, first_call_on_thread, nullptr) == 0);
  exhaust();
  REQUIRE(held_count > 0);

  for (size_t size : {UNUSED_CLASS_SIZE, MiB})
  {
    check_fails("malloc", size, [&] { return std::malloc(size); });
    check_fails("calloc", size, [&] { return std::calloc(1, size); });
    check_fails("realloc", size, [&] { return std::realloc(hide(small), size); });
    check_fails("realloc(NULL)", size, [&] { return std::realloc(nullptr, size); });
    check_fails("reallocarray", size, [&] { return ::reallocarray(nullptr, size, 1); });
    check_fails("aligned_alloc", size, [&] { return std::aligned_alloc(4096, size); });
    check_fails("memalign", size, [&] { return ::memalign(4096, size); });
    check_fails("valloc", size, [&] { return ::valloc(size); });
    check_fails("pvalloc", size, [&] { return ::pvalloc(size); });
    void* p = &p;
    note(::posix_memalign(&p, 4096, size) == ENOMEM && p == &p, "posix_memalign", size);
    check_throws_bad_alloc("new", size, [&] { hide(::operator new(size)); });
    check_throws_bad_alloc("new[]", size, [&] { hide(::operator new[](size)); });
    check_throws_bad_alloc(
      "aligned new", size, [&] { hide(::operator new(size, std::align_val_t(4096))); });
    note(::operator new(size, std::nothrow) == nullptr, "new(nothrow)", size);
    note(::operator new[](size, std::nothrow) == nullptr, "new[](nothrow)", size);
  }
  // A failed realloc leaves the block as it was.
  note(static_cast<unsigned char*>(small)[99] == 0x5a, "block kept by realloc", 100);
  note(::malloc_usable_size(small) >= 100, "malloc_usable_size", 100);

  ::sem_post(&out_of_memory);
  ::pthread_join(thread, nullptr);

  const char* env = std::getenv("SNMALLOC_PROFILE");
  bool sampling_all = env != nullptr && std::strcmp(env, "rate=1") == 0;
  if (snmalloc_profile_samples_dropped != nullptr && sampling_all)
  {
    note(snmalloc_profile_samples_dropped() > 0, "samples dropped", 0);
    struct snmalloc_stats stats;
    note(snmalloc_stats(&stats) == 0 && stats.profile_samples_dropped == snmalloc_profile_samples_dropped(),
      "samples dropped in the statistics", 0);
  }

  // Free, and carry on.
  release();
  for (size_t i = 0; i < problem_count; i++)
    FAIL_CHECK(problems[i].what << " of " << problems[i].size << " bytes");
  void* big = std::malloc(MiB);
  void* medium = std::malloc(UNUSED_CLASS_SIZE);
  REQUIRE(big != nullptr);
  REQUIRE(medium != nullptr);
  std::memset(big, 1, MiB);
  std::memset(medium, 2, UNUSED_CLASS_SIZE);
  std::free(big);
  std::free(medium);
  std::free(small);
  // The parent's proof that this ran (an unknown test name exits with 0).
  if (problem_count == 0)
    ::_exit(snmalloc_test::RAN_CLEAN);
}

TEST_CASE("every entry point fails cleanly when memory runs out", "[oom]")
{
  CHECK(snmalloc_test::reexec_ran_clean(
    "out of memory (child)", limit_address_space(LIMIT)));
}

namespace
{
  // The limit of the test below: a small one, as `ulimit -v 1048576` sets.
  constexpr rlim_t SMALL_LIMIT = rlim_t(1) << 30;
  constexpr size_t BLOCK = size_t(16) << 10;

  void* idle(void*)
  {
    return nullptr;
  }

  // Threads with 8 MiB stacks, as glibc gives by default, started at once;
  // how many could be.
  size_t threads_started(size_t wanted)
  {
    pthread_attr_t attr;
    ::pthread_attr_init(&attr);
    ::pthread_attr_setstacksize(&attr, 8 * MiB);
    pthread_t threads[64];
    size_t n = 0;
    while (n < wanted && n < 64 && ::pthread_create(&threads[n], &attr, idle, nullptr) == 0)
      n++;
    for (size_t i = 0; i < n; i++)
      ::pthread_join(threads[i], nullptr);
    ::pthread_attr_destroy(&attr);
    return n;
  }
} // namespace

// An address-space limit set before start: the heap holds only the address
// space it has used, so that 48 threads' stacks (384 MiB of 1 GiB) can be
// mapped first, and then takes nearly all the limit leaves, as glibc's
// malloc does (an arena reserved whole had taken half, 384 MiB, threads or
// none).  16 KiB blocks, slab objects, cost the checks build no guard
// pages.
TEST_CASE("under a small address-space limit (child)", "[.oom]")
{
  rlimit limit{};
  REQUIRE(::getrlimit(RLIMIT_AS, &limit) == 0);
  REQUIRE(limit.rlim_cur == SMALL_LIMIT);
  size_t threads = threads_started(48);
  CHECK(threads == 48);
  size_t count = 0;
  while (count < sizeof(held) / sizeof(held[0]))
  {
    auto* p = static_cast<unsigned char*>(std::malloc(BLOCK));
    if (p == nullptr)
      break;
    p[0] = static_cast<unsigned char>(count);
    p[BLOCK - 1] = static_cast<unsigned char>(count >> 8);
    held[count++] = p;
  }
  INFO(count << " blocks of 16 KiB under a limit of " << (SMALL_LIMIT >> 20) << " MiB");
  // Sampled, a block is a profile-pool block with its record after it:
  // twice the address space.
  const char* env = std::getenv("SNMALLOC_PROFILE");
  bool sampling_all = env != nullptr && std::strcmp(env, "rate=1") == 0;
  bool enough = count * BLOCK >= SMALL_LIMIT / 10 * (sampling_all ? 4 : 8);
  bool ran_out = count < sizeof(held) / sizeof(held[0]);
  CHECK(enough);
  CHECK(ran_out);
  size_t intact = 0;
  for (size_t i = 0; i < count; i++)
  {
    auto* p = static_cast<unsigned char*>(held[i]);
    intact += p[0] == static_cast<unsigned char>(i) &&
      p[BLOCK - 1] == static_cast<unsigned char>(i >> 8);
    std::free(p);
  }
  CHECK(intact == count);
  void* again = std::malloc(size_t(64) << 20);
  CHECK(again != nullptr);
  std::free(again);
  if (threads == 48 && enough && ran_out && intact == count && again != nullptr)
    ::_exit(snmalloc_test::RAN_CLEAN);
}

TEST_CASE("a small address-space limit leaves room for the heap", "[oom]")
{
  // qemu-user reserves the guest's 32 GiB before the program runs
  // (cmake/toolchains/qemu-aarch64-run.sh), which such a limit refuses.
  if (std::getenv("SNMALLOC_TEST_EMULATOR") != nullptr)
    return;
  CHECK(snmalloc_test::reexec_ran_clean(
    "under a small address-space limit (child)", limit_address_space(SMALL_LIMIT)));
}

namespace
{
  // A limit that leaves the heap tens of MiB: below the smallest arena
  // reserved whole (192 MiB), where every malloc had failed.
  constexpr rlim_t TINY_LIMIT = rlim_t(128) << 20;

  // Address space mapped (inaccessible) until the limit refuses a page; the
  // mappings stay.  How many there are.
  void* address_space_taken[256];

  size_t take_all_address_space()
  {
    return snmalloc_test::exhaust(address_space_taken,
      sizeof(address_space_taken) / sizeof(address_space_taken[0]), size_t(1) << 30, 4096,
      snmalloc_test::map_inaccessible);
  }
} // namespace

TEST_CASE("under a tiny address-space limit (child)", "[.oom]")
{
  size_t count = 0;
  while (count < sizeof(held) / sizeof(held[0]))
  {
    auto* p = static_cast<unsigned char*>(std::malloc(BLOCK));
    if (p == nullptr)
      break;
    p[0] = 1;
    held[count++] = p;
  }
  INFO(count << " blocks of 16 KiB under a limit of " << (TINY_LIMIT >> 20) << " MiB");
  bool enough = count * BLOCK >= TINY_LIMIT / 4;
  for (size_t i = 0; i < count; i++)
    std::free(held[i]);
  CHECK(enough);
  if (enough)
    ::_exit(snmalloc_test::RAN_CLEAN);
}

// What the arena cannot reserve, a free range inside it still serves, and
// the call that succeeds so leaves errno as it was: a realloc moved into
// the gap a freed block left, once nothing can be mapped.
TEST_CASE("a call served beside a failed reservation leaves errno (child)", "[.oom]")
{
  constexpr size_t MiB = size_t(1) << 20;
  void* gap = std::malloc(100 * MiB);
  auto* p = static_cast<unsigned char*>(std::malloc(8 * MiB));
  REQUIRE(gap != nullptr);
  REQUIRE(p != nullptr);
  std::memset(p, 7, 8 * MiB);
  std::free(gap);
  REQUIRE(take_all_address_space() > 0);
  errno = 0;
  auto* q = static_cast<unsigned char*>(std::realloc(p, 60 * MiB));
  int realloc_errno = errno;
  REQUIRE(q != nullptr);
  CHECK(realloc_errno == 0);
  bool kept = q[0] == 7 && q[8 * MiB - 1] == 7;
  CHECK(kept);
  errno = 0;
  void* r = std::malloc(20 * MiB);
  int malloc_errno = errno;
  CHECK(r != nullptr);
  CHECK(malloc_errno == 0);
  std::free(r);
  std::free(q);
  if (realloc_errno == 0 && r != nullptr && malloc_errno == 0 && kept)
    ::_exit(snmalloc_test::RAN_CLEAN);
}

TEST_CASE("the heap works under a tiny limit and leaves errno when it cannot grow", "[oom]")
{
  if (std::getenv("SNMALLOC_TEST_EMULATOR") != nullptr)
    return; // as above
  CHECK(snmalloc_test::reexec_ran_clean(
    "under a tiny address-space limit (child)", limit_address_space(TINY_LIMIT)));
  CHECK(snmalloc_test::reexec_ran_clean(
    "a call served beside a failed reservation leaves errno (child)",
    limit_address_space(SMALL_LIMIT)));
}

namespace
{
  // Write the first and last byte of the `size` bytes at p; false if p is
  // null.
  bool touch(void* p, size_t size)
  {
    if (p == nullptr)
      return false;
    static_cast<unsigned char*>(p)[0] = 1;
    static_cast<unsigned char*>(p)[size - 1] = 2;
    return true;
  }

  // A limit of 1 GiB: a heap of at most about 950 MiB.
  constexpr rlim_t ROOM_LIMIT = rlim_t(1) << 30;
} // namespace

// Under that limit, large objects freed, or shrunk in place and held, leave
// their address space to later requests, in a heap that never holds a
// fifth of the limit.  The checks build keeps freed runs back (a
// quarantine) and places runs in blocks of the power of two above their
// length: it had refused a 64 MiB request after five such objects had
// been freed, and after five had been shrunk and held, and one of 64 KiB
// and a byte after 190 of those had been freed.
TEST_CASE("freed and shrunk large objects leave room (child)", "[.oom]")
{
  size_t failed_at = 0;
  const char* failed = nullptr;
  auto fail = [&](const char* what, size_t round) {
    if (failed == nullptr)
    {
      failed = what;
      failed_at = round;
    }
  };
  // Each round frees its object: sizes just past a chunk's multiples, and
  // large ones shrunk before the free.
  for (size_t round = 0; round < 3000; round++)
  {
    size_t size = (size_t(1) << 16) + 1 + (round % 5) * 4096;
    void* p = std::malloc(size);
    if (!touch(p, size))
      fail("malloc and free", round);
    std::free(p);
  }
  for (size_t round = 0; round < 150; round++)
  {
    size_t size = (size_t(32) << 20) + (round % 4) * (size_t(16) << 20);
    void* p = std::malloc(size);
    if (!touch(p, size))
      fail("malloc, shrink and free", round);
    void* q = std::realloc(p, (size_t(256) << 10) << (round % 4));
    std::free(q == nullptr ? p : q);
  }
  // Shrunk objects held: 30 of 1-2 MiB, each first of 64-88 MiB (sampled
  // at rate=1, the checks build fitted 39, unsampled more than 48).
  void* kept[30];
  size_t count = 0;
  for (; count < 30; count++)
  {
    size_t size = (size_t(64) << 20) + (count % 4) * (size_t(8) << 20);
    void* p = std::malloc(size);
    if (!touch(p, size))
    {
      fail("malloc with shrunk objects held", count);
      break;
    }
    size_t small = MiB + (count % 3) * (MiB / 2);
    void* q = std::realloc(p, small);
    if (!touch(q, small))
      q = p;
    kept[count] = q;
  }
  for (size_t i = 0; i < count; i++)
    std::free(kept[i]);
  if (failed == nullptr)
    ::_exit(snmalloc_test::RAN_CLEAN);
  INFO(failed << " failed at round " << failed_at);
  CHECK(failed == nullptr);
}

TEST_CASE("freed and shrunk large objects leave room under an address-space limit", "[oom]")
{
  if (std::getenv("SNMALLOC_TEST_EMULATOR") != nullptr)
    return; // as above
  CHECK(snmalloc_test::reexec_ran_clean(
    "freed and shrunk large objects leave room (child)", limit_address_space(ROOM_LIMIT)));
}
