// Many threads allocating through the C++ API, handing objects to each
// other to free, with (in profiling builds) sampling at a small interval and
// dumps running alongside.  It does not replace malloc, so it also runs
// under ThreadSanitizer (which brings its own malloc):
//   cmake -DCMAKE_CXX_FLAGS=-fsanitize=thread ... && ./cpp_stress
// Every object carries a cookie over its whole size, checked by whoever
// frees it: an object handed out twice, or written by a stranger, fails.
#include <snmalloc/snmalloc.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <random>
#include <thread>
#include <unistd.h>
#include <vector>

namespace
{
  constexpr int THREADS = 8;

  struct Inbox
  {
    std::mutex lock;
    std::deque<std::pair<void*, size_t>> items;
  };

  Inbox inboxes[THREADS];
  std::atomic<long> live{0};
  std::atomic<int> failures{0};

  uint8_t cookie_of(size_t size, uintptr_t p)
  {
    return uint8_t((size * 31) ^ (p >> 4));
  }

  void stamp(void* p, size_t size)
  {
    std::memset(p, cookie_of(size, uintptr_t(p)), size);
  }

  void check_and_free(void* p, size_t size)
  {
    auto* b = static_cast<uint8_t*>(p);
    uint8_t c = cookie_of(size, uintptr_t(p));
    for (size_t i = 0; i < size; i += (size > 4096 ? 512 : 1))
    {
      if (b[i] != c)
      {
        std::fprintf(stderr, "cookie broken at %p+%zu (size %zu)\n", p, i, size);
        failures++;
        break;
      }
    }
    if (snmalloc::alloc_size(p) < size)
    {
      std::fprintf(stderr, "alloc_size(%p) < %zu\n", p, size);
      failures++;
    }
    snmalloc::dealloc(p, size);
    live--;
  }

  size_t pick_size(std::mt19937_64& rng)
  {
    switch (rng() % 16)
    {
      case 0:
        return 64 * 1024 + rng() % (512 * 1024); // large
      case 1:
      case 2:
        return 1024 + rng() % 16384;
      default:
        return 1 + rng() % 256;
    }
  }

  void worker(int self, int rounds)
  {
    std::mt19937_64 rng(uint64_t(self) * 7919 + 1);
    std::vector<std::pair<void*, size_t>> mine;
    for (int r = 0; r < rounds; r++)
    {
      for (int i = 0; i < 64; i++)
      {
        size_t size = pick_size(rng);
        size_t align = size_t(1) << (rng() % 8); // 1..128
        void* p = align > 16 ? snmalloc::alloc_aligned(align, size) : snmalloc::alloc(size);
        if (p == nullptr || uintptr_t(p) % align != 0)
        {
          std::fprintf(stderr, "alloc(%zu, align %zu) gave %p\n", size, align, p);
          failures++;
          continue;
        }
        live++;
        stamp(p, size);
        int to = int(rng() % THREADS);
        if (to == self)
        {
          mine.emplace_back(p, size);
        }
        else
        {
          std::lock_guard<std::mutex> g(inboxes[to].lock);
          inboxes[to].items.emplace_back(p, size);
        }
      }
      std::deque<std::pair<void*, size_t>> got;
      {
        std::lock_guard<std::mutex> g(inboxes[self].lock);
        got.swap(inboxes[self].items);
      }
      for (auto& [p, size] : got)
        check_and_free(p, size);
      while (mine.size() > 256)
      {
        check_and_free(mine.back().first, mine.back().second);
        mine.pop_back();
      }
    }
    for (auto& [p, size] : mine)
      check_and_free(p, size);
  }
} // namespace

int main(int argc, char** argv)
{
  int rounds = argc > 1 ? std::atoi(argv[1]) : 400;
  std::atomic<bool> done{false};
#if SNMALLOC_PROFILE
  snmalloc::profile::start(4096);
  std::thread dumper([&] {
    char path[] = "/tmp/cpp_stress.XXXXXX";
    int fd = mkstemp(path);
    while (!done)
    {
      if (!snmalloc::profile::dump(fd).ok())
        failures++;
      if (ftruncate(fd, 0) != 0 || lseek(fd, 0, SEEK_SET) != 0)
        failures++;
    }
    close(fd);
    unlink(path);
  });
#endif
  // Generations of threads: allocators are pooled and reused, with the
  // objects and samples the previous owner left.
  for (int generation = 0; generation < 3; generation++)
  {
    std::vector<std::thread> threads;
    for (int t = 0; t < THREADS; t++)
      threads.emplace_back(worker, t, rounds);
    for (auto& t : threads)
      t.join();
    for (int t = 0; t < THREADS; t++)
    {
      for (auto& [p, size] : inboxes[t].items)
        check_and_free(p, size);
      inboxes[t].items.clear();
    }
  }
  done = true;
#if SNMALLOC_PROFILE
  dumper.join();
  snmalloc::profile::stop();
#endif
  std::printf("cpp_stress: %d failures, %ld objects still live\n", failures.load(), live.load());
  return failures == 0 && live == 0 ? 0 : 1;
}
