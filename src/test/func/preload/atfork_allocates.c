// pthread_atfork handlers registered by a library's constructor, before
// the shim's first allocation (atfork_allocates_lib.c): some allocate,
// some hold the library's own lock across fork(), which one of the
// program's threads holds while it allocates.  The shim registers its own
// handlers ahead of them (override/atfork_first.h), so that fork() takes
// the allocator's locks after the library's prepare handlers and gives
// them back before its parent and child handlers; registered after them,
// the allocator's locks were held while the library's prepare handler
// waited for its lock, held by a thread that waited in malloc for the
// allocator's.  Each allocating handler allocates small, large and zeroed
// blocks, grows one and frees them, in every fork of a process whose
// other threads allocate meanwhile.  alarm() ends a stuck parent or child
// (SIGALRM).
#include "atfork_allocates.h"
#include "fork_children.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum
{
  FORKS = 24,
  WORKERS = 2,
  LIMIT_S = 60
};

static atomic_int stop;

static void* work(void* arg)
{
  unsigned round = (unsigned)(uintptr_t)arg;
  while (!atomic_load_explicit(&stop, memory_order_relaxed))
    allocate_and_free(round++);
  return NULL;
}

static void* work_under_library_lock(void* arg)
{
  unsigned round = (unsigned)(uintptr_t)arg;
  while (!atomic_load_explicit(&stop, memory_order_relaxed))
  {
    pthread_mutex_lock(&library_lock);
    allocate_and_free(round++);
    pthread_mutex_unlock(&library_lock);
  }
  return NULL;
}

// The child handler ran once in this process, before fork returned.
static int child_checks(int round)
{
  (void)round;
  return atomic_load(&in_child) == 1 && allocate_and_free(11) ? 0 : 1;
}

int main(void)
{
  alarm(LIMIT_S);
  pthread_t workers[WORKERS];
  for (uintptr_t i = 0; i < WORKERS; i++)
    if (pthread_create(&workers[i], NULL, i == 0 ? work_under_library_lock : work, (void*)(i * 7)) != 0)
      return 2;
  int failures = fork_children(FORKS, LIMIT_S, child_checks);
  if (failures < 0)
    return 3;
  atomic_store(&stop, 1);
  for (int i = 0; i < WORKERS; i++)
    pthread_join(workers[i], NULL);
  int handled = atomic_load(&prepared) == FORKS && atomic_load(&in_parent) == FORKS;
  printf(
    "%d forks, prepare handler allocated in %d, parent handler in %d, %d children failed\n",
    FORKS,
    atomic_load(&prepared),
    atomic_load(&in_parent),
    failures);
  return failures == 0 && handled ? 0 : 1;
}
