// Time to write the footprint profile against the heap profile, on a heap
// of N GiB (default 1): small objects of 16 to 2048 bytes and a few large
// ones of 256 KiB to 4 MiB, a random half of them freed (fragmentation),
// sampled at the default 512 KiB.  Each dump is timed three times end to
// end (for the footprint: the chunk walk, mincore, smaps, encoding, gzip,
// write); the median is printed with the footprint's total against VmRSS,
// and the median of its two system-facing parts.
// Then the cost of reading residency both ways over a resident range of
// the heap's size: mincore against /proc/self/pagemap (resident_pages.h
// says why mincore).  See docs/performance.md.
//
//   perf-footprint-time [GiB] [profile-directory]
#include <snmalloc/snmalloc.h>
#include <snmalloc/snmalloc_profile.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <random>
#include <string>
#include <sys/mman.h>
#include <unistd.h>
#include <vector>

namespace
{
  using Clock = std::chrono::steady_clock;

  double ms_since(Clock::time_point t0)
  {
    return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  }

  template<typename F>
  double median_ms(F&& f)
  {
    double t[3];
    for (double& each : t)
    {
      auto t0 = Clock::now();
      f();
      each = ms_since(t0);
    }
    std::sort(t, t + 3);
    return t[1];
  }

  __attribute__((noinline)) void build_heap(size_t bytes, std::vector<void*>& kept)
  {
    std::mt19937_64 random(42);
    std::vector<void*> all;
    size_t total = 0;
    while (total < bytes)
    {
      size_t size = random() % 512 == 0 ? (size_t(256) << 10) << (random() % 5) : 16 + random() % 2033;
      void* p = std::malloc(size);
      std::memset(p, 1, size);
      all.push_back(p);
      total += size;
    }
    std::shuffle(all.begin(), all.end(), random);
    for (size_t i = all.size() / 2; i < all.size(); i++)
      std::free(all[i]);
    all.resize(all.size() / 2);
    kept = std::move(all);
  }

  size_t vm_rss()
  {
    FILE* f = std::fopen("/proc/self/status", "r");
    char line[256];
    size_t kib = 0;
    while (f != nullptr && std::fgets(line, sizeof(line), f) != nullptr)
      if (std::strncmp(line, "VmRSS:", 6) == 0)
        kib = std::strtoull(line + 6, nullptr, 10);
    if (f != nullptr)
      std::fclose(f);
    return kib * 1024;
  }

  void residency_cost(size_t bytes)
  {
    size_t pages = bytes / 4096;
    auto* range = static_cast<char*>(
      mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    std::memset(range, 1, bytes);
    std::vector<unsigned char> present(pages);
    double mincore_ms = median_ms([&] { (void)mincore(range, bytes, present.data()); });
    std::vector<uint64_t> entries(pages);
    int fd = open("/proc/self/pagemap", O_RDONLY);
    double pagemap_ms = median_ms([&] {
      (void)!pread(fd, entries.data(), pages * 8, off_t(uintptr_t(range) / 4096 * 8));
    });
    close(fd);
    munmap(range, bytes);
    std::printf(
      "residency of %zu MiB: mincore %.2f ms, /proc/self/pagemap %.2f ms\n", bytes >> 20,
      mincore_ms, pagemap_ms);
  }
} // namespace

int main(int argc, char** argv)
{
  size_t gib = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 1;
  std::string dir = argc > 2 ? argv[2] : ".";
  std::string heap_path = dir + "/footprint-time-heap.pb.gz";
  std::string footprint_path = dir + "/footprint-time-footprint.pb.gz";
  snmalloc_profile_start(512 * 1024);
  std::vector<void*> kept;
  build_heap(gib << 30, kept);

  double heap_ms = median_ms([&] { (void)snmalloc_profile_dump(heap_path.c_str()); });
  double footprint_ms = median_ms([&] { (void)snmalloc_profile_dump_footprint(footprint_path.c_str()); });
  size_t rss = vm_rss();
  snmalloc::profile::Footprint f = snmalloc::profile::read_footprint();
  double total = 0;
  for (const auto& row : f.rows)
    total += row.resident_bytes;
  std::printf(
    "heap of %zu GiB allocated, %zu objects held: dump %.1f ms, dump_footprint %.1f ms "
    "(%.1f ms beyond); footprint total %.1f MiB, VmRSS %.1f MiB (%+.2f%%)\n",
    gib, kept.size(), heap_ms, footprint_ms, footprint_ms - heap_ms, total / 1048576.0,
    double(rss) / 1048576.0, 100.0 * (total - double(rss)) / double(rss));
  // Its parts: the walk over the arena with its mincore, and smaps.
  double arena_ms = median_ms([] { (void)snmalloc::profile::read_arena_residency(); });
  double smaps_ms = median_ms([] {
    (void)snmalloc::profile::read_mapping_rows([](uintptr_t, uintptr_t) { return size_t(0); });
  });
  std::printf("of the footprint: arena walk and mincore %.1f ms, /proc/self/smaps %.1f ms\n", arena_ms, smaps_ms);
  residency_cost(gib << 30);
  for (void* p : kept)
    std::free(p);
  return 0;
}
