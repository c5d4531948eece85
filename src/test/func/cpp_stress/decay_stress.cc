// Threads allocating and freeing large objects while others give memory back
// to the OS: one frees more than the allocator keeps resident (a decay of
// everything), one calls trim(), one forks.  The pages go back outside the
// backend's lock, with their blocks off the free lists meanwhile, so the
// checks are: no object handed out twice or overlapping another (each
// carries a cookie on every page, checked at its free), zeroed allocations
// read zero (a block put back after its pages went is clean, and so is what
// it merges into only if every part was), no allocation fails, and a child
// forked meanwhile finds no block off the free lists (a decay in flight at
// the fork would never put its blocks back there) and can allocate.
// Like cpp_stress, it does not replace malloc, so it also runs under
// ThreadSanitizer:
//   cmake -DCMAKE_CXX_FLAGS=-fsanitize=thread ... && ./decay_stress
#include "support/child_wait.h"

#include <snmalloc/snmalloc.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <thread>
#include <unistd.h>
#include <vector>

namespace
{
  constexpr size_t PAGE = 4096;
  std::atomic<int> failures{0};
  std::atomic<bool> done{false};
  // A child allocates a few MiB and exits: one still running after this
  // long is stuck (ctest's timeout for the whole test is 300 s).
  constexpr int CHILD_LIMIT_S = 30;

  void fail(const char* what, const void* p, size_t size)
  {
    std::fprintf(stderr, "decay_stress: %s: %p (%zu bytes)\n", what, p, size);
    failures++;
  }

  uint64_t cookie_of(const void* p, size_t size, size_t offset)
  {
    return (uintptr_t(p) * 0x9E3779B97F4A7C15ULL) ^ (size << 20) ^ offset;
  }

  // A word on every page and at the end (the page words end before the
  // last word begins).
  void stamp(void* p, size_t size)
  {
    auto* b = static_cast<char*>(p);
    for (size_t o = 0; o + 16 <= size; o += PAGE)
    {
      uint64_t c = cookie_of(p, size, o);
      std::memcpy(b + o, &c, 8);
    }
    uint64_t c = cookie_of(p, size, size - 8);
    std::memcpy(b + size - 8, &c, 8);
  }

  void check_and_free(void* p, size_t size)
  {
    const auto* b = static_cast<const char*>(p);
    uint64_t c;
    for (size_t o = 0; o + 16 <= size; o += PAGE)
    {
      std::memcpy(&c, b + o, 8);
      if (c != cookie_of(p, size, o))
      {
        fail("cookie broken", p, size);
        break;
      }
    }
    std::memcpy(&c, b + size - 8, 8);
    if (c != cookie_of(p, size, size - 8))
      fail("cookie broken at the end", p, size);
    snmalloc::dealloc(p, size);
  }

  void* must_alloc(size_t size, bool zeroed)
  {
    void* p = zeroed ? snmalloc::alloc_zeroed(size) : snmalloc::alloc(size);
    if (p == nullptr)
      fail("allocation failed", p, size);
    return p;
  }

  // Zeroed memory: every 512th byte and the last, before the stamp.
  void check_zero(const void* p, size_t size)
  {
    const auto* b = static_cast<const unsigned char*>(p);
    for (size_t o = 0; o < size; o += 512)
    {
      if (b[o] != 0)
      {
        fail("zeroed allocation not zero", p, size);
        return;
      }
    }
    if (b[size - 1] != 0)
      fail("zeroed allocation not zero at its end", p, size);
  }

  // Large objects of 16 KiB to 4 MiB, some zeroed, some kept a while.
  void worker(unsigned seed, int rounds)
  {
    std::mt19937_64 rng(seed);
    std::vector<std::pair<void*, size_t>> kept;
    for (int r = 0; r < rounds; r++)
    {
      size_t size = (size_t(16) << 10) << (rng() % 9);
      size += rng() % size;
      bool zeroed = rng() % 3 == 0;
      void* p = must_alloc(size, zeroed);
      if (p == nullptr)
        continue;
      if (zeroed)
        check_zero(p, size);
      stamp(p, size);
      kept.emplace_back(p, size);
      if (kept.size() > 8 || rng() % 2 == 0)
      {
        size_t i = rng() % kept.size();
        check_and_free(kept[i].first, kept[i].second);
        kept[i] = kept.back();
        kept.pop_back();
      }
    }
    for (auto& [p, size] : kept)
      check_and_free(p, size);
  }

  // 288 MiB of 4 MiB blocks written and freed at once: past the resident
  // memory a backend keeps free, so the free that crosses it starts a
  // decay of everything.
  void releaser()
  {
    constexpr size_t BLOCK = size_t(4) << 20;
    std::vector<void*> blocks(72);
    while (!done.load(std::memory_order_acquire))
    {
      for (void*& b : blocks)
      {
        b = must_alloc(BLOCK, false);
        if (b != nullptr)
          stamp(b, BLOCK);
      }
      for (void* b : blocks)
      {
        if (b != nullptr)
          check_and_free(b, BLOCK);
      }
    }
  }

  // Chunks the child's backend shows as taken by a decay: none, as the
  // fork waited for decays in flight.
  size_t chunks_decommitting()
  {
    size_t n = 0;
    size_t carved = snmalloc::backend.chunks_carved();
    for (size_t i = 0; i < carved; i++)
    {
      uintptr_t owner = snmalloc::pagemap.entries[i].get_owner();
      n += snmalloc::is_tag_of(owner, snmalloc::ChunkKind::Decommitting);
    }
    return n;
  }

  // A child forked while decays run checks the above, allocates, writes and
  // frees, and then gives back every free page (no thread of the parent
  // still waits for decays there).
  void forker()
  {
    while (!done.load(std::memory_order_acquire))
    {
      pid_t pid = fork();
      if (pid == 0)
      {
        if (chunks_decommitting() != 0)
          _exit(3);
        for (int i = 0; i < 64; i++)
        {
          size_t size = size_t(64) << 10;
          void* p = snmalloc::alloc_zeroed(size);
          if (p == nullptr)
            _exit(2);
          std::memset(p, 7, size);
          snmalloc::dealloc(p);
        }
        void* big = snmalloc::alloc(size_t(1) << 20);
        if (big == nullptr)
          _exit(2);
        std::memset(big, 7, size_t(1) << 20);
        snmalloc::dealloc(big);
        snmalloc::trim();
        if (snmalloc::backend.usage().dirty_free_bytes != 0)
          _exit(4);
        _exit(0);
      }
      if (pid < 0)
      {
        fail("fork failed", nullptr, 0);
        return;
      }
      int status = snmalloc_test::wait_with_limit(pid, std::chrono::seconds(CHILD_LIMIT_S));
      if (status == -1)
      {
        // Stuck on a lock its parent's threads held: another child would
        // likely hang too.
        fail("forked child hung", nullptr, 0);
        return;
      }
      if (!snmalloc_test::exited_cleanly(status))
        fail("forked child failed", nullptr, size_t(status));
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
} // namespace

int main(int argc, char** argv)
{
  int rounds = argc > 1 ? std::atoi(argv[1]) : 3000;
  std::vector<std::thread> workers;
  for (unsigned t = 0; t < 4; t++)
    workers.emplace_back(worker, t * 7919 + 1, rounds);
  std::thread release(releaser);
  std::thread trimming([] {
    while (!done.load(std::memory_order_acquire))
    {
      snmalloc::trim();
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  });
  std::thread forking(forker);
  for (auto& w : workers)
    w.join();
  done.store(true, std::memory_order_release);
  release.join();
  trimming.join();
  forking.join();
  std::printf("decay_stress: %d failures\n", failures.load());
  return failures == 0 ? 0 : 1;
}
