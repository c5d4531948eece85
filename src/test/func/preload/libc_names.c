/* Run with a shim preloaded: glibc's own names for the malloc family
   (__libc_malloc and the rest), which some programs call to reach the C
   library's allocator past a wrapper, are the shim's functions, so their
   objects and the shim's mix in every pairing, small and large. */
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern void* __libc_malloc(size_t);
extern void* __libc_calloc(size_t, size_t);
extern void* __libc_realloc(void*, size_t);
extern void __libc_free(void*);
extern void* __libc_memalign(size_t, size_t);
extern void* __libc_valloc(size_t);
extern void* __libc_pvalloc(size_t);

static int failures = 0;

static void check(int ok, const char* what, size_t size)
{
  if (!ok)
  {
    fprintf(stderr, "FAIL: %s (%zu bytes)\n", what, size);
    failures++;
  }
}

static int all_zero(const unsigned char* p, size_t n)
{
  for (size_t i = 0; i < n; i++)
  {
    if (p[i] != 0)
      return 0;
  }
  return 1;
}

int main(void)
{
  const size_t sizes[] = {1, 24, 700, 5000, 70000, 300000, 3 << 20};
  for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
  {
    size_t n = sizes[i];
    /* glibc's name allocates, the shim frees, and the other way round. */
    unsigned char* a = __libc_malloc(n);
    check(a != NULL && malloc_usable_size(a) >= n, "__libc_malloc", n);
    memset(a, 0x5a, n);
    a = realloc(a, n * 2);
    check(a != NULL && a[n - 1] == 0x5a, "realloc of __libc_malloc's object", n);
    free(a);

    unsigned char* b = malloc(n);
    memset(b, 0x3c, n);
    b = __libc_realloc(b, n + 100);
    check(b != NULL && b[n - 1] == 0x3c, "__libc_realloc of malloc's object", n);
    __libc_free(b);

    /* calloc's memory is zero also where a freed object's was not. */
    unsigned char* dirty = malloc(n);
    memset(dirty, 0xff, n);
    free(dirty);
    unsigned char* c = __libc_calloc(1, n);
    check(c != NULL && all_zero(c, n), "__libc_calloc", n);
    free(c);

    void* m = __libc_memalign(4096, n);
    check(m != NULL && (uintptr_t)m % 4096 == 0, "__libc_memalign", n);
    free(m);
    void* v = __libc_valloc(n);
    check(v != NULL && (uintptr_t)v % 4096 == 0, "__libc_valloc", n);
    __libc_free(v);
    void* pv = __libc_pvalloc(n);
    check(pv != NULL && (uintptr_t)pv % 4096 == 0 && malloc_usable_size(pv) >= 4096,
      "__libc_pvalloc", n);
    free(pv);
  }
  check(__libc_malloc((size_t)-1) == NULL, "__libc_malloc of SIZE_MAX fails", (size_t)-1);
  __libc_free(NULL);
  if (failures == 0)
    printf("glibc's names are the shim's functions\n");
  return failures == 0 ? 0 : 1;
}
