// The library of atfork_allocates.c: its constructor registers fork
// handlers that allocate, and handlers that hold the library's lock across
// fork(), as a library that keeps a cache across fork() would.  A
// library's constructors run before a preloaded shim's first allocation.
#include "atfork_allocates.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

atomic_int prepared, in_parent, in_child;
pthread_mutex_t library_lock = PTHREAD_MUTEX_INITIALIZER;

// Blocks of 24 bytes to 8 MiB, the size changing with each call, so that
// the handlers reach the slabs' refills and the large-object backend.
int allocate_and_free(unsigned round)
{
  size_t small = 24 + (round * 40) % 4000;
  size_t large = ((size_t)1 << 20) + ((size_t)(round % 8) << 20);
  unsigned char* a = malloc(small);
  unsigned char* b = malloc(large);
  unsigned char* c = calloc(1, large / 2);
  if (a == NULL || b == NULL || c == NULL)
    return 0;
  memset(a, 0x5a, small);
  memset(b, 0xa5, large);
  int zeroed = c[0] == 0 && c[large / 2 - 1] == 0;
  unsigned char* grown = realloc(a, small * 64);
  if (grown == NULL)
    return 0;
  int kept = grown[0] == 0x5a && grown[small - 1] == 0x5a;
  free(grown);
  free(b);
  free(c);
  return zeroed && kept;
}

static void prepare(void)
{
  if (allocate_and_free((unsigned)atomic_load(&prepared)))
    atomic_fetch_add(&prepared, 1);
}

static void parent(void)
{
  if (allocate_and_free((unsigned)atomic_load(&in_parent) + 3))
    atomic_fetch_add(&in_parent, 1);
}

static void child(void)
{
  if (allocate_and_free((unsigned)atomic_load(&in_child) + 5))
    atomic_fetch_add(&in_child, 1);
}

static void lock_library(void)
{
  pthread_mutex_lock(&library_lock);
}

static void unlock_library(void)
{
  pthread_mutex_unlock(&library_lock);
}

__attribute__((constructor)) static void register_first(void)
{
  if (pthread_atfork(lock_library, unlock_library, unlock_library) != 0)
    abort();
  if (pthread_atfork(prepare, parent, child) != 0)
    abort();
}
