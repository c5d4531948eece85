// fork() while one thread reads long lines with getline (glibc's getdelim
// grows the line with realloc while it holds the stream's lock) and
// another flushes every stream (fflush(NULL) holds the lock of the list
// of streams and takes each stream's).  fork() locks that list itself,
// after the fork handlers: an allocator whose handler had taken its locks
// by then waited for the list, whose holder waited for the reader, which
// waited in realloc for the allocator (every fork hung).  Each child
// writes through stdio (a new stream, so the list) and checks what it
// wrote.  alarm() ends a stuck parent or child (SIGALRM).
#define _GNU_SOURCE
#include "fork_children.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum
{
  FORKS = 150,
  LIMIT_S = 60
};

static char text[4 << 20];
static atomic_int stop;

// Lines of 100 bytes to 1 MB, so that most reads grow the line, some of
// them into large objects.
static void fill_text(void)
{
  size_t next_break = 100, step = 100;
  for (size_t i = 0; i < sizeof text; i++)
  {
    text[i] = i == next_break ? '\n' : 'a' + (char)(i % 26);
    if (i == next_break)
    {
      step = step * 7 % 1000003 + 100;
      next_break += step;
    }
  }
}

static void* read_lines(void* arg)
{
  long lines = 0;
  while (!atomic_load_explicit(&stop, memory_order_relaxed))
  {
    FILE* f = fmemopen(text, sizeof text, "r");
    if (f == NULL)
      abort();
    char* line = NULL;
    size_t capacity = 0;
    while (getline(&line, &capacity, f) > 0)
    {
      lines++;
      if (lines % 3 == 0) // a fresh line, grown from nothing, now and then
      {
        free(line);
        line = NULL;
        capacity = 0;
      }
    }
    free(line);
    fclose(f);
  }
  return arg;
}

static void* flush_all(void* arg)
{
  while (!atomic_load_explicit(&stop, memory_order_relaxed))
    fflush(NULL);
  return arg;
}

// The child's stdio: a stream of its own, written, closed and read back.
static int child_writes(int round)
{
  char* contents = NULL;
  size_t length = 0;
  FILE* out = open_memstream(&contents, &length);
  if (out == NULL)
    return 1;
  for (int i = 0; i < 1000; i++)
    fprintf(out, "%d:%d ", round, i);
  if (fclose(out) != 0)
    return 2;
  char expected[32];
  snprintf(expected, sizeof expected, "%d:999 ", round);
  int ok = length > strlen(expected) &&
    strcmp(contents + length - strlen(expected), expected) == 0;
  free(contents);
  return ok ? 0 : 3;
}

int main(void)
{
  alarm(LIMIT_S);
  fill_text();
  pthread_t reader, flusher;
  if (pthread_create(&reader, NULL, read_lines, NULL) != 0 ||
      pthread_create(&flusher, NULL, flush_all, NULL) != 0)
    return 2;
  int failures = fork_children(FORKS, LIMIT_S, child_writes);
  if (failures < 0)
    return 3;
  atomic_store(&stop, 1);
  pthread_join(reader, NULL);
  pthread_join(flusher, NULL);
  printf("%d forks, %d children failed\n", FORKS, failures);
  return failures == 0 ? 0 : 1;
}
