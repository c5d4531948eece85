// Time of the heap census (snmalloc_heap_walk) per live object: a heap of
// small objects of mixed sizes (16 B to 1 KiB), made by allocating twice
// the live count and freeing half at random, so that slabs are part free
// as in a real heap; then the census, timed, five times.  Prints the best
// and the median run and the nanoseconds per live object.  Instructions
// come from callgrind, counting the census alone (one line):
//   valgrind --tool=callgrind --toggle-collect='*heap_walk_with*'
//     build/on/src/test/perf/profile/perf-census-time --objects 1000000 --runs 1
// With or without profiling (the census is in every build).
#include <snmalloc/snmalloc_stats.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

namespace
{
  struct Tally
  {
    size_t objects = 0;
    size_t bytes = 0;
  };

  size_t flag_value(int argc, char** argv, const char* flag, size_t fallback)
  {
    for (int i = 1; i + 1 < argc; i++)
    {
      if (std::strcmp(argv[i], flag) == 0)
        return std::strtoull(argv[i + 1], nullptr, 10);
    }
    return fallback;
  }
} // namespace

int main(int argc, char** argv)
{
  bool smoke = argc > 1 && std::strcmp(argv[1], "--smoke") == 0;
  size_t live = smoke ? 10000 : flag_value(argc, argv, "--objects", 1000000);
  size_t runs = smoke ? 1 : flag_value(argc, argv, "--runs", 5);

  std::mt19937_64 rng(42);
  std::vector<void*> objects(2 * live);
  for (void*& p : objects)
  {
    p = std::malloc(16 + rng() % 1009);
    if (p == nullptr)
      return 1;
  }
  std::shuffle(objects.begin(), objects.end(), rng);
  for (size_t i = live; i < objects.size(); i++)
    std::free(objects[i]);
  objects.resize(live);

  std::vector<double> ms;
  Tally t;
  for (size_t r = 0; r < runs; r++)
  {
    t = {};
    auto start = std::chrono::steady_clock::now();
    snmalloc_heap_walk(
      [](void*, size_t size, void* arg) {
        auto* tally = static_cast<Tally*>(arg);
        tally->objects++;
        tally->bytes += size;
      },
      &t);
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  // The program's own objects (the vectors) are live too.
  if (t.objects < live || t.objects > live + 16)
  {
    std::fprintf(stderr, "FAIL: census visited %zu objects, %zu held\n", t.objects, live);
    return 1;
  }
  std::sort(ms.begin(), ms.end());
  double median = ms[ms.size() / 2];
  std::printf(
    "census: %zu live objects, %zu bytes; best %.2f ms, median %.2f ms (%.1f ns per object) over %zu runs\n",
    t.objects, t.bytes, ms.front(), median, median * 1e6 / double(t.objects), runs);
  for (void* p : objects)
    std::free(p);
  return 0;
}
