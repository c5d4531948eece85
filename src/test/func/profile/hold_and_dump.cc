// Holds a known set from one function of its own, called from main, then
// dumps the profile twice, to argv[1] and argv[2], and prints each dump's
// result: run by without_zlib.sh with and without a libz.so.1 the loader
// can use, and by walker_end_to_end.sh built with another stack walker.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <snmalloc/snmalloc_profile.h>

__attribute__((noinline)) void** hold_objects(size_t count, size_t size)
{
  auto** held = static_cast<void**>(std::malloc(count * sizeof(void*)));
  for (size_t i = 0; i < count; i++)
  {
    held[i] = std::malloc(size);
    std::memset(held[i], int(i), size);
  }
  asm volatile("" : : "r"(held) : "memory");
  return held;
}

int main(int argc, char** argv)
{
  if (argc != 3)
    return 2;
  void** held = hold_objects(1000, 3000);
  int first = snmalloc_profile_dump(argv[1]);
  void** more = hold_objects(500, 700);
  int second = snmalloc_profile_dump(argv[2]);
  std::printf("dumps %d %d\n", first, second);
  asm volatile("" : : "r"(held), "r"(more) : "memory");
  return 0;
}
