/* Memory overhead of profiling: holds about 1 GiB in objects of 16..1024
   bytes (every byte written) and prints the resident set.  Run it under the
   plain shim and under the profiling shim started (see docs/performance.md);
   the difference is what profiling costs in memory.  --smoke holds 16 MiB. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char** argv)
{
  size_t target = (argc > 1 && strcmp(argv[1], "--smoke") == 0) ? (16u << 20) : (1u << 30);
  size_t capacity = target / 16 + 1, n = 0, bytes = 0;
  void** keep = malloc(capacity * sizeof(void*));
  unsigned x = 1;
  if (keep == NULL)
    return 1;
  while (bytes < target && n < capacity)
  {
    x = x * 1103515245u + 12345u;
    size_t size = 16 + (x >> 16) % 1009;
    keep[n] = malloc(size);
    if (keep[n] == NULL)
      return 1;
    memset(keep[n], 1, size);
    bytes += size;
    n++;
  }
  long pages = 0, resident = 0;
  FILE* f = fopen("/proc/self/statm", "r");
  if (f == NULL || fscanf(f, "%ld %ld", &pages, &resident) != 2)
    return 1;
  fclose(f);
  printf("RESULT name=memory-overhead objects=%zu bytes=%zu rss_mib=%ld\n", n, bytes,
         resident * 4096 >> 20);
  return 0;
}
