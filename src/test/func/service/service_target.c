/* A program that behaves like a service for the automatic-dump, peak and
   leak-report tests (service.sh), run with the profiling shim preloaded:
     every MIB    allocates and frees MIB MiB in 64 KiB blocks
     growth       grows to 128 MiB, frees it, grows to 128 MiB again
     period MS    holds 1 MiB for MS milliseconds
     peak         256 MiB at peak_site_a, freed, then 32 MiB at peak_site_b
     leak         leaks 4 MiB, 1 MiB and 256 KiB from three functions and
                  512 KiB grown by realloc in a fourth, frees 8 MiB in an
                  atexit handler, and exits with status 3
     late-leak    the same, but asks for the leak report itself, with
                  snmalloc_profile_configure after registering its handler
     signal-back  catches SIGUSR1 itself, lets the profiler take it for
                  dumps, reconfigures without it, raises it: exits 0 if its
                  own handler ran again
   The first four modes then wait a second, for the helper thread's dumps. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BLOCK (64 * 1024)
#define PAGE 4096

static void pause_ms(long ms)
{
  struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&t, &t) != 0)
  {
  }
}

static void** hold(size_t bytes, size_t size)
{
  size_t n = bytes / size;
  void** held = calloc(n + 1, sizeof(void*));
  for (size_t i = 0; i < n; i++)
  {
    held[i] = malloc(size);
    memset(held[i], 1, 64);
  }
  return held;
}

static void release(void** held)
{
  for (size_t i = 0; held[i] != NULL; i++)
    free(held[i]);
  free(held);
}

__attribute__((noinline)) void** peak_site_a(void)
{
  return hold((size_t)256 << 20, PAGE);
}

__attribute__((noinline)) void** peak_site_b(void)
{
  return hold((size_t)32 << 20, PAGE);
}

__attribute__((noinline)) void** leak_large(void)
{
  return hold((size_t)4 << 20, PAGE);
}

__attribute__((noinline)) void** leak_medium(void)
{
  return hold((size_t)1 << 20, PAGE);
}

__attribute__((noinline)) void** leak_small(void)
{
  return hold((size_t)256 << 10, PAGE);
}

static void** freed_at_exit;

__attribute__((noinline)) void** freed_at_exit_site(void)
{
  return hold((size_t)8 << 20, PAGE);
}

static void free_at_exit(void)
{
  release(freed_at_exit);
}

/* The profiler's C API, from the preloaded shim. */
static int configure(const char* settings)
{
  int (*f)(const char*) = (int (*)(const char*))dlsym(RTLD_DEFAULT, "snmalloc_profile_configure");
  if (f == NULL)
  {
    fprintf(stderr, "service_target: snmalloc_profile_configure not found\n");
    exit(2);
  }
  return f(settings);
}

static volatile sig_atomic_t own_handler_ran;

static void own_handler(int sig)
{
  (void)sig;
  own_handler_ran = 1;
}

/* Grown by realloc in 64 KiB steps, in place or moved. */
__attribute__((noinline)) void* leak_grown(void)
{
  void* p = NULL;
  for (size_t size = BLOCK; size <= 8 * BLOCK; size += BLOCK)
    p = realloc(p, size);
  memset(p, 1, 64);
  return p;
}

static void leak_four(void)
{
  leak_medium();
  leak_small();
  leak_large();
  leak_grown();
}

int main(int argc, char** argv)
{
  const char* mode = argc > 1 ? argv[1] : "";
  if (strcmp(mode, "every") == 0 && argc > 2)
  {
    long mib = atol(argv[2]);
    for (long i = 0; i < mib * (1 << 20) / BLOCK; i++)
    {
      void* volatile p = malloc(BLOCK);
      free(p);
    }
  }
  else if (strcmp(mode, "growth") == 0)
  {
    release(hold((size_t)128 << 20, BLOCK));
    release(hold((size_t)128 << 20, BLOCK));
  }
  else if (strcmp(mode, "period") == 0 && argc > 2)
  {
    void** held = hold((size_t)1 << 20, BLOCK);
    pause_ms(atol(argv[2]));
    release(held);
    return 0;
  }
  else if (strcmp(mode, "peak") == 0)
  {
    release(peak_site_a());
    void** b = peak_site_b();
    pause_ms(100);
    release(b);
    return 0;
  }
  else if (strcmp(mode, "leak") == 0)
  {
    freed_at_exit = freed_at_exit_site();
    atexit(free_at_exit);
    leak_four();
    exit(3);
  }
  else if (strcmp(mode, "late-leak") == 0)
  {
    freed_at_exit = freed_at_exit_site();
    atexit(free_at_exit);
    if (configure("leak_report=1,rate=4k") != 0)
      return 2;
    leak_four();
    exit(3);
  }
  else if (strcmp(mode, "signal-back") == 0)
  {
    signal(SIGUSR1, own_handler);
    if (configure("dump_on_signal=SIGUSR1") != 0 || configure("rate=512k") != 0)
      return 2;
    raise(SIGUSR1);
    return own_handler_ran ? 0 : 1;
  }
  else
  {
    fprintf(stderr, "usage: service_target every MIB | growth | period MS | peak | leak | late-leak | signal-back\n");
    return 2;
  }
  pause_ms(1000);
  return 0;
}
