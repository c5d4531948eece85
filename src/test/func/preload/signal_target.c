/* A multi-threaded program that holds a known set (HELD blocks of 100 KiB,
   allocated in hold_blocks) while four threads churn small objects, until
   it is told to stop by the file named in argv[1] appearing.  Used to send
   it dump signals while it runs.  Prints "ready" once the set is held. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define HELD 200
#define BLOCK (100 * 1024)

static atomic_int stop;
static void* held[HELD];

__attribute__((noinline)) static void hold_blocks(void)
{
  for (int i = 0; i < HELD; i++)
  {
    held[i] = malloc(BLOCK);
    memset(held[i], i, BLOCK);
  }
}

static void* churn(void* arg)
{
  unsigned x = (unsigned)(size_t)arg;
  void* ring[256] = {0};
  while (!atomic_load(&stop))
  {
    for (int i = 0; i < 256; i++)
    {
      x = x * 1103515245u + 12345u;
      free(ring[i]);
      ring[i] = malloc(16 + (x >> 16) % 2000);
    }
  }
  for (int i = 0; i < 256; i++)
    free(ring[i]);
  return NULL;
}

int main(int argc, char** argv)
{
  if (argc < 2)
    return 2;
  hold_blocks();
  pthread_t threads[4];
  for (int i = 0; i < 4; i++)
    pthread_create(&threads[i], NULL, churn, (void*)(size_t)(i + 1));
  printf("ready\n");
  fflush(stdout);
  while (access(argv[1], F_OK) != 0)
    usleep(10000);
  atomic_store(&stop, 1);
  for (int i = 0; i < 4; i++)
    pthread_join(threads[i], NULL);
  long sum = 0;
  for (int i = 0; i < HELD; i++)
  {
    sum += ((unsigned char*)held[i])[BLOCK - 1];
    free(held[i]);
  }
  printf("done %ld\n", sum);
  return 0;
}
