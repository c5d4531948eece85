/* Start-up cost: the CPU time (user + system, from wait4's rusage) of a
 * program started N times under each of several preloaded libraries in
 * turn, interleaved so that a shared machine's load falls on all alike.
 * Prints each library's median, first quartile and mean in microseconds.
 * The environment is inherited (set SNMALLOC_PROFILE=... for the profiling
 * shim); "none" as a library runs the program without LD_PRELOAD.
 *
 *   perf-start-cpu 2000 /bin/true build/on/libsnmallocshim.so \
 *     build/on/libsnmallocshim-profile.so
 *   perf-start-cpu 1000 "build/on/src/test/perf/perf-fork-exec --child" ...
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

enum { MAX_ARGS = 8 };

static int compare_long(const void* a, const void* b)
{
  long x = *(const long*)a, y = *(const long*)b;
  return x < y ? -1 : x > y;
}

/* One start of argv under `library`; its CPU time, or -1 if it failed. */
static long start_once(char** argv, const char* library)
{
  pid_t child = fork();
  if (child < 0)
    return -1;
  if (child == 0)
  {
    if (strcmp(library, "none") == 0)
      unsetenv("LD_PRELOAD");
    else
      setenv("LD_PRELOAD", library, 1);
    execv(argv[0], argv);
    _exit(127);
  }
  int status;
  struct rusage usage;
  if (wait4(child, &status, 0, &usage) != child || !WIFEXITED(status) ||
      WEXITSTATUS(status) != 0)
    return -1;
  return (usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) * 1000000L +
    usage.ru_utime.tv_usec + usage.ru_stime.tv_usec;
}

int main(int argc, char** argv)
{
  if (argc < 4 || atoi(argv[1]) < 1)
  {
    fprintf(stderr, "usage: %s N \"program [args]\" library...\n", argv[0]);
    return 2;
  }
  int n = atoi(argv[1]);
  int libraries = argc - 3;
  char* words[MAX_ARGS + 1];
  int w = 0;
  for (char* t = strtok(argv[2], " "); t != NULL && w < MAX_ARGS; t = strtok(NULL, " "))
    words[w++] = t;
  words[w] = NULL;
  long* times = calloc((size_t)n * (size_t)libraries, sizeof(long));
  if (times == NULL)
    return 1;
  for (int i = 0; i < n; i++)
  {
    for (int l = 0; l < libraries; l++)
    {
      long t = start_once(words, argv[3 + l]);
      if (t < 0)
      {
        fprintf(stderr, "%s failed under %s\n", words[0], argv[3 + l]);
        return 1;
      }
      times[(size_t)l * (size_t)n + (size_t)i] = t;
    }
  }
  for (int l = 0; l < libraries; l++)
  {
    long* t = times + (size_t)l * (size_t)n;
    double sum = 0;
    for (int i = 0; i < n; i++)
      sum += (double)t[i];
    qsort(t, (size_t)n, sizeof(long), compare_long);
    printf("%-50s median %6ld us  p25 %6ld us  mean %8.1f us\n", argv[3 + l], t[n / 2], t[n / 4], sum / n);
  }
  free(times);
  return 0;
}
