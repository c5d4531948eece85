/* Run with a shim preloaded: glibc's functions about the heap must answer
   for the shim's heap, not glibc's own (which holds nothing then). */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t resident_bytes(void)
{
  unsigned long total = 0, resident = 0;
  FILE* f = fopen("/proc/self/statm", "r");
  if (f == NULL || fscanf(f, "%lu %lu", &total, &resident) != 2)
    resident = 0;
  if (f != NULL)
    fclose(f);
  return resident * 4096;
}

static int fail(const char* what, size_t got, size_t want)
{
  fprintf(stderr, "FAIL: %s: %zu, expected at least %zu\n", what, got, want);
  return 1;
}

int main(void)
{
  enum { COUNT = 4000, SIZE = 2000 };
  static void* held[COUNT];
  for (int i = 0; i < COUNT; i++)
  {
    held[i] = malloc(SIZE);
    memset(held[i], i, SIZE);
  }
  void* large = malloc(8 << 20);
  memset(large, 1, 8 << 20);
  struct mallinfo2 info = mallinfo2();
  size_t small = (size_t)COUNT * SIZE;
  if (info.uordblks < small)
    return fail("mallinfo2().uordblks", info.uordblks, small);
  if (info.hblkhd < (8 << 20) || info.hblks < 1)
    return fail("mallinfo2().hblkhd", info.hblkhd, 8 << 20);
  /* Freed, its pages stay until their decay (the checks shim's quarantine
     keeps them too), or malloc_trim. */
  size_t touched = resident_bytes();
  free(large);
  if (malloc_trim(0) != 1)
    return fail("malloc_trim(0) after a touched 8 MiB block was freed", 0, 1);
  size_t trimmed = resident_bytes();
  if (trimmed + (4 << 20) > touched)
    return fail("resident bytes given back by free and malloc_trim", touched - trimmed, 4 << 20);
  for (int i = 0; i < COUNT; i++)
    free(held[i]);
  puts("ok");
  return 0;
}
