/* Preloaded before the profiling shim, labels every thread's allocations
   (tenant=bench): the main thread's from the start, every other thread's
   from its first instruction.  So a benchmark that knows nothing of labels
   runs with a label set, for the cost of labels at a sample
   (scripts/bench/callgrind-totals.sh, PROFILE_PRELOAD; docs/performance.md). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>

int snmalloc_profile_label_push(const char* key, const char* value);

struct start
{
  void* (*routine)(void*);
  void* argument;
};

static void* labelled_start(void* p)
{
  struct start s = *(struct start*)p;
  free(p);
  snmalloc_profile_label_push("tenant", "bench");
  return s.routine(s.argument);
}

int pthread_create(
  pthread_t* thread, const pthread_attr_t* attributes, void* (*routine)(void*), void* argument)
{
  static int (*real)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*);
  if (real == NULL)
    *(void**)&real = dlsym(RTLD_NEXT, "pthread_create");
  struct start* s = malloc(sizeof(struct start));
  if (s == NULL)
    return real(thread, attributes, routine, argument);
  s->routine = routine;
  s->argument = argument;
  int error = real(thread, attributes, labelled_start, s);
  if (error != 0)
    free(s);
  return error;
}

__attribute__((constructor)) static void label_main_thread(void)
{
  snmalloc_profile_label_push("tenant", "bench");
}
