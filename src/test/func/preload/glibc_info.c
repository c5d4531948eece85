/* Run with a shim preloaded: glibc's functions about the heap must answer
   for the shim's heap, not glibc's own (which holds nothing then). */
#include <errno.h>
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

/* malloc_info's report, whole, in `text`; its length, 0 on failure. */
static size_t malloc_info_text(char* text, size_t capacity)
{
  FILE* f = tmpfile();
  if (f == NULL || malloc_info(0, f) != 0)
    return 0;
  rewind(f);
  size_t n = fread(text, 1, capacity - 1, f);
  fclose(f);
  text[n] = '\0';
  return n;
}

/* The two numbers after `start`, in the first element of the report that
   holds it (`start` ends at the first one's opening quote); 0 if there is
   none. */
static int info_pair(const char* text, const char* start, size_t* first, size_t* second)
{
  const char* at = strstr(text, start);
  unsigned long long a = 0, b = 0;
  if (at == NULL || sscanf(at + strlen(start), "%llu\" %*[a-z]=\"%llu", &a, &b) != 2)
    return 0;
  *first = (size_t)a;
  *second = (size_t)b;
  return 1;
}

/* glibc's elements, each after the one before. */
static int info_shape_ok(const char* text)
{
  static const char* const in_order[] = {"<malloc version=\"1\">\n<heap nr=\"0\">\n<sizes>\n",
    "</sizes>\n", "<total type=\"fast\"", "<total type=\"rest\"", "<system type=\"current\"",
    "<aspace type=\"total\"", "</heap>\n", "<total type=\"rest\"", "<total type=\"mmap\"",
    "<system type=\"current\"", "</malloc>\n"};
  const char* at = text;
  for (size_t i = 0; i < sizeof(in_order) / sizeof(in_order[0]); i++)
  {
    at = strstr(at, in_order[i]);
    if (at == NULL || (i == 0 && at != text))
      return 0;
    at += strlen(in_order[i]);
  }
  return *at == '\0';
}

/* malloc_info with `held` small objects, every other one freed, and an
   8 MiB block live. */
static int check_malloc_info(void* held[], int count, size_t size)
{
  static char text[1 << 16];
  if (malloc_info_text(text, sizeof(text)) == 0)
    return fail("malloc_info(0, tmpfile())", 0, 1);
  if (!info_shape_ok(text))
  {
    fprintf(stderr, "FAIL: malloc_info's report is not in glibc's shape:\n%s", text);
    return 1;
  }
  size_t runs = 0, mmapped = 0;
  if (!info_pair(text, "<total type=\"mmap\" count=\"", &runs, &mmapped) || runs < 1 ||
      mmapped < (8 << 20))
    return fail("malloc_info's mmapped bytes", mmapped, 8 << 20);
  /* The freed half is free objects of the class that holds `size`, listed
     up to that class's size (a sampled object's usable size is its class's
     too); and in the heap's total of free chunks. */
  for (int i = 0; i < count; i += 2)
    free(held[i]);
  if (malloc_info_text(text, sizeof(text)) == 0)
    return fail("malloc_info(0, tmpfile()) again", 0, 1);
  char element[64];
  snprintf(element, sizeof(element), "to=\"%zu\" total=\"", malloc_usable_size(held[1]));
  size_t bytes = 0, objects = 0, rest = 0, rest_bytes = 0;
  if (!info_pair(text, element, &bytes, &objects) ||
      !info_pair(text, "<total type=\"rest\" count=\"", &rest, &rest_bytes))
  {
    fprintf(stderr, "FAIL: no free objects of %zu bytes in malloc_info's report:\n%s", size, text);
    return 1;
  }
  /* Less the few the profiling shim sampled (about 8 at its 512 KiB),
     which live apart. */
  if (objects < (size_t)count * 3 / 8)
    return fail("free objects of the freed class in malloc_info", objects, count * 3 / 8);
  if (rest < objects || rest_bytes < bytes)
    return fail("malloc_info's free total against the freed class's", rest_bytes, bytes);
  for (int i = 0; i < count; i += 2)
    held[i] = malloc(size);
  if (malloc_info(1, stdout) != EINVAL)
    return fail("malloc_info(1, ...) is EINVAL", 0, EINVAL);
  return 0;
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
  if (check_malloc_info(held, COUNT, SIZE) != 0)
    return 1;
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
