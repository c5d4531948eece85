// The footprint profile, read as a user would with `go tool pprof -top`:
// a program holding a fragmented heap on four threads and a mapping of its
// own asks where its resident memory is.  The expectations are the
// program's own figures (what it freed, what it mapped, VmRSS), not the
// allocator's.
#include "support/files.h"
#include "support/pprof_output.h"
#include "support/profiling.h"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <cstring>
#include <malloc.h>
#include <random>
#include <snmalloc/snmalloc_profile.h>
#include <string>
#include <sys/mman.h>
#include <thread>
#include <vector>

using namespace snmalloc_test;

namespace
{
  constexpr size_t HEAP_BYTES = size_t(256) << 20, THREADS = 4;
  constexpr size_t OUTSIDE_BYTES = size_t(64) << 20;

  size_t vm_rss()
  {
    std::string status = read_file("/proc/self/status");
    size_t at = status.find("VmRSS:");
    return at == std::string::npos ? 0 : std::strtoull(status.c_str() + at + 6, nullptr, 10) * 1024;
  }

  int64_t total(const std::map<std::string, int64_t>& rows)
  {
    int64_t sum = 0;
    for (const auto& row : rows)
      sum += row.second;
    return sum;
  }

  bool starts_with(const std::string& s, const char* prefix)
  {
    return s.compare(0, std::strlen(prefix), prefix) == 0;
  }
} // namespace

// One thread's share: objects of 16 to 768 bytes, varied, a random 75% of
// them freed by the thread itself; returns the usable bytes it freed.
__attribute__((noinline)) size_t fragment_heap(std::vector<void*>& kept, unsigned seed)
{
  std::mt19937_64 random(seed);
  std::vector<void*> all;
  size_t bytes = 0;
  while (bytes < HEAP_BYTES / THREADS)
  {
    size_t size = 16 + random() % 753;
    void* p = std::malloc(size);
    std::memset(p, 0x5a, size);
    bytes += size;
    all.push_back(p);
  }
  std::shuffle(all.begin(), all.end(), random);
  size_t freed = 0, keep = all.size() / 4;
  for (size_t i = keep; i < all.size(); i++)
  {
    freed += malloc_usable_size(all[i]);
    std::free(all[i]);
  }
  all.resize(keep);
  kept = std::move(all);
  return freed;
}

TEST_CASE("footprint: a fragmented heap on four threads and a mapping add up to VmRSS")
{
  TempDir dir;
  ProfilingAt profiling(512 * 1024);
  std::vector<std::vector<void*>> kept(THREADS);
  std::vector<size_t> freed(THREADS);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < THREADS; t++)
    threads.emplace_back([&, t] { freed[t] = fragment_heap(kept[t], unsigned(t + 1)); });
  for (auto& t : threads)
    t.join();
  size_t freed_total = 0;
  for (size_t f : freed)
    freed_total += f;

  void* outside = mmap(nullptr, OUTSIDE_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(outside != MAP_FAILED);
  std::memset(outside, 1, OUTSIDE_BYTES);

  std::string path = dir.path() + "/footprint.pb.gz";
  size_t rss_before = vm_rss();
  REQUIRE(snmalloc_profile_dump_footprint(path.c_str()) == 0);
  size_t rss_after = vm_rss();
  double rss = double(rss_before + rss_after) / 2;

  auto rows = flat_values(path, "resident_space", "B");
  INFO("rows total " << total(rows) << ", VmRSS " << rss_before << " .. " << rss_after);
  CHECK(double(total(rows)) == Approx(rss).epsilon(0.05));

  int64_t fragmentation = 0, outside_row = 0;
  for (const auto& [name, bytes] : rows)
  {
    if (starts_with(name, "snmalloc: free slots") || starts_with(name, "snmalloc: empty slabs") ||
        starts_with(name, "snmalloc: freed chunks"))
      fragmentation += bytes;
    if (starts_with(name, "[anon: ") && name.find(" 64 MiB mapped]") != std::string::npos)
      outside_row += bytes;
  }
  INFO("fragmentation rows " << fragmentation << ", freed by the program " << freed_total);
  CHECK(double(fragmentation) == Approx(double(freed_total)).epsilon(0.10));
  CHECK(double(outside_row) == Approx(double(OUTSIDE_BYTES)).epsilon(0.02));

  // The sites that pin the slabs carry their waste: all of it is in the one
  // allocating function here.
  auto waste = flat_values(path, "slab_waste_space", "B");
  CHECK(double(waste["fragment_heap"]) == Approx(double(fragmentation)).epsilon(0.10));

  for (auto& list : kept)
    for (void* p : list)
      std::free(p);
  munmap(outside, OUTSIDE_BYTES);
}

__attribute__((noinline)) void* large_half_touched(size_t bytes)
{
  void* p = std::malloc(bytes);
  std::memset(p, 1, bytes / 2);
  return p;
}

TEST_CASE("footprint: a large object touched on half its pages counts half")
{
  TempDir dir;
  ProfilingAt profiling(1); // every allocation sampled: the object's own row
  for (size_t megabytes : {4, 32})
  {
    size_t bytes = megabytes << 20;
    void* p = large_half_touched(bytes);
    std::string path = dir.path() + "/large.pb.gz";
    REQUIRE(snmalloc_profile_dump_footprint(path.c_str()) == 0);
    auto rows = flat_values(path, "resident_space", "B");
    INFO(megabytes << " MiB");
    CHECK(double(rows["large_half_touched"]) == Approx(double(bytes / 2)).epsilon(0.02));
    std::free(p);
  }
}
