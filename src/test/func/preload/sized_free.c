/* Run with a shim preloaded: C23's free_sized and free_aligned_sized, and
   the old cfree that glibc still exports, are the shim's (a C library's
   would pass the shim's objects to its own free) and free what they are
   given.  Found with dlsym, as the C library
   of the build machine may not declare them. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef void (*free_sized_fn)(void*, size_t);
typedef void (*free_aligned_sized_fn)(void*, size_t, size_t);
typedef void (*cfree_fn)(void*);

static void* shim_function(const char* name)
{
  void* f = dlsym(RTLD_DEFAULT, name);
  Dl_info info;
  if (f == NULL || dladdr(f, &info) == 0 || strstr(info.dli_fname, "snmallocshim") == NULL)
  {
    fprintf(stderr, "FAIL: %s is not the preloaded shim's\n", name);
    exit(1);
  }
  return f;
}

/* Bytes of small objects and large runs in use, as the shim counts them. */
static size_t in_use(void)
{
  struct mallinfo2 info = mallinfo2();
  return info.uordblks + info.hblkhd;
}

int main(void)
{
  free_sized_fn free_sized = (free_sized_fn)shim_function("free_sized");
  free_aligned_sized_fn free_aligned_sized =
    (free_aligned_sized_fn)shim_function("free_aligned_sized");
  cfree_fn cfree = (cfree_fn)shim_function("cfree");
  size_t before = in_use();
  /* Enough that a leak by any of the three would be gigabytes. */
  static const size_t sizes[] = {24, 1000, 20000, 100000, 1 << 21};
  for (int round = 0; round < 20000; round++)
  {
    size_t size = sizes[round % 5];
    void* p = malloc(size);
    memset(p, round, size);
    free_sized(p, size);
    size_t align = (size_t)64 << (round % 7);
    void* q = aligned_alloc(align, size);
    if (q == NULL || (size_t)q % align != 0)
    {
      fprintf(stderr, "FAIL: aligned_alloc(%zu, %zu)\n", align, size);
      return 1;
    }
    memset(q, round, size);
    free_aligned_sized(q, align, size);
    void* r = calloc(1, size);
    if (r == NULL)
    {
      fprintf(stderr, "FAIL: calloc(1, %zu)\n", size);
      return 1;
    }
    cfree(r);
  }
  free_sized(NULL, 8);
  cfree(NULL);
  size_t after = in_use();
  if (after > before + (1 << 20))
  {
    fprintf(stderr, "FAIL: %zu bytes in use after the frees, %zu before\n", after, before);
    return 1;
  }
  return 0;
}
