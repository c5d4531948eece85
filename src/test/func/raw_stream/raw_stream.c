/* The raw sample stream through the C API, compiled as C to prove the
   header is C.  At interval 1 every allocation is sampled, so the snapshot
   and the event stream must match what the program did exactly. */
#include <snmalloc/snmalloc_profile.h>

#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 1000
#define FREED 400

static int failures = 0;
#define CHECK(cond)                                                   \
  do                                                                  \
  {                                                                   \
    if (!(cond))                                                      \
    {                                                                 \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      failures++;                                                     \
    }                                                                 \
  } while (0)

static void* objects[N];

static int index_of(uintptr_t address)
{
  for (int i = 0; i < N; i++)
    if ((uintptr_t)objects[i] == address)
      return i;
  return -1;
}

static void test_snapshot_and_events(void)
{
  static struct snmalloc_profile_event events[4 * N];
  uint64_t dropped = 99;
  CHECK(snmalloc_profile_events_start(4 * N) == 0);
  CHECK(snmalloc_profile_start(1) == 0);
  for (int i = 0; i < N; i++)
    objects[i] = malloc(100 + (size_t)i);
  for (int i = 0; i < FREED; i++)
    free(objects[i]);
  CHECK(snmalloc_profile_stop() == 0);

  /* Snapshot: exactly the live ones of ours (other live samples may exist
     from start-up of the C library, but none at our addresses twice). */
  snmalloc_profile_snapshot* snap = NULL;
  CHECK(snmalloc_profile_snapshot_take(&snap) == 0);
  size_t count = snmalloc_profile_snapshot_count(snap);
  int seen[N] = {0};
  for (size_t i = 0; i < count; i++)
  {
    struct snmalloc_profile_sample s;
    CHECK(snmalloc_profile_snapshot_get(snap, i, &s) == 0);
    int k = index_of(s.address);
    if (k < 0)
      continue;
    seen[k]++;
    CHECK(s.requested_size == 100 + (size_t)k);
    CHECK(s.allocated_size == malloc_usable_size(objects[k]));
    CHECK(s.interval == 1);
    CHECK(s.weight == 1.0);
    CHECK(s.depth > 0 && s.frames != NULL);
    CHECK(s.thread_id != 0 && s.time_ns > 0);
  }
  struct snmalloc_profile_sample past;
  CHECK(snmalloc_profile_snapshot_get(snap, count, &past) == ERANGE);
  snmalloc_profile_snapshot_free(snap);
  for (int i = 0; i < N; i++)
    CHECK(seen[i] == (i < FREED ? 0 : 1));

  /* Events: one birth per object, one death per freed one, in order. */
  size_t n = snmalloc_profile_events_read(events, 4 * N, &dropped);
  CHECK(dropped == 0);
  int births[N] = {0}, deaths[N] = {0};
  for (size_t i = 0; i < n; i++)
  {
    int k = index_of(events[i].sample.address);
    if (k < 0)
      continue;
    if (events[i].kind == SNMALLOC_PROFILE_EVENT_ALLOC)
    {
      CHECK(deaths[k] == 0);
      births[k]++;
    }
    else
    {
      CHECK(events[i].kind == SNMALLOC_PROFILE_EVENT_FREE);
      CHECK(births[k] == 1);
      deaths[k]++;
    }
  }
  for (int i = 0; i < N; i++)
  {
    CHECK(births[i] == 1);
    CHECK(deaths[i] == (i < FREED ? 1 : 0));
  }
  CHECK(snmalloc_profile_events_stop() == 0);
  for (int i = FREED; i < N; i++)
    free(objects[i]);
}

static void test_slow_reader_drops(void)
{
  struct snmalloc_profile_event events[64];
  uint64_t dropped = 0;
  CHECK(snmalloc_profile_events_start(16) == 0);
  CHECK(snmalloc_profile_start(1) == 0);
  for (int i = 0; i < N; i++)
    objects[i] = malloc(64);
  CHECK(snmalloc_profile_stop() == 0);
  size_t n = snmalloc_profile_events_read(events, 64, &dropped);
  CHECK(n == 16);
  CHECK(dropped >= N - 16);
  CHECK(snmalloc_profile_events_read(events, 64, &dropped) == 0);
  CHECK(snmalloc_profile_events_stop() == 0);
  for (int i = 0; i < N; i++)
    free(objects[i]);
}

int main(void)
{
  test_snapshot_and_events();
  test_slow_reader_drops();
  printf("raw_stream: %s\n", failures == 0 ? "passed" : "FAILED");
  return failures == 0 ? 0 : 1;
}
