/* A program holding known amounts at known sites, for the HTTP endpoint's
   tests (http.sh), run with the profiling shim preloaded and
   SNMALLOC_PROFILE=http=...  It prints "port N" (from the C API) and
   "ready", then answers commands on stdin, one line each:
     grow        allocate GROW_MIB more at grow_site         -> "grown"
     peak        PEAK_MIB at peak_site, then free it          -> "peaked"
     many N      N objects sampled at rate 1, each a distinct (stack,
                 requested size): a heap profile of N rows, rate
                 restored                                      -> "many"
     work S      S seconds of allocating and freeing, every block stamped
                 and checked                                   -> "work ok"
     check       every held block still has its stamp          -> "heap ok"
     fork        a child that finds no server running, starts its own,
                 gets /metrics from it and stops it            -> "fork ok"
     quit        free everything and exit 0
   Every held object is 4 KiB, a sizeclass size, so what it occupies is what
   was asked for.  peak and work run on a thread of their own that exits: an
   exited thread's allocator is idle, and reading the statistics recounts
   idle allocators' slabs, so what they freed no longer counts as live
   (snmalloc_stats.h). */
#include <arpa/inet.h>
#include <dlfcn.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define OBJECT 4096
#define SITE_A_MIB 64
#define SITE_B_MIB 16
#define GROW_MIB 32
#define PEAK_MIB 128

struct held
{
  size_t n;
  unsigned char** p;
  unsigned char stamp;
};

static void hold(struct held* h, size_t mib, unsigned char stamp)
{
  h->n = (mib << 20) / OBJECT;
  h->p = calloc(h->n, sizeof(void*));
  h->stamp = stamp;
  for (size_t i = 0; i < h->n; i++)
  {
    h->p[i] = malloc(OBJECT);
    memset(h->p[i], stamp, OBJECT);
  }
}

static int intact(const struct held* h)
{
  for (size_t i = 0; i < h->n; i++)
  {
    for (size_t k = 0; k < OBJECT; k += 512)
    {
      if (h->p[i][k] != h->stamp || h->p[i][OBJECT - 1] != h->stamp)
        return 0;
    }
  }
  return 1;
}

static void release(struct held* h)
{
  for (size_t i = 0; i < h->n; i++)
    free(h->p[i]);
  free(h->p);
  h->n = 0;
  h->p = NULL;
}

__attribute__((noinline)) void site_a(struct held* h)
{
  hold(h, SITE_A_MIB, 0xa1);
}

__attribute__((noinline)) void site_b(struct held* h)
{
  hold(h, SITE_B_MIB, 0xb2);
}

__attribute__((noinline)) void grow_site(struct held* h)
{
  hold(h, GROW_MIB, 0xc3);
}

__attribute__((noinline)) void peak_site(struct held* h)
{
  hold(h, PEAK_MIB, 0xd4);
}

/* One object of 16 + i % 1000 bytes, allocated below a path of eight
   calls, each to many_left or many_right as the bits of i / 1000 say: so
   that every object (up to 256,000) is a live row of its own, live rows
   being per stack and requested size. */
void* many_left(size_t i, size_t path, int levels);
void* many_right(size_t i, size_t path, int levels);

static void* many_object(size_t i, size_t path, int levels)
{
  if (levels == 0)
    return malloc(16 + i % 1000);
  return (path & 1) ? many_left(i, path >> 1, levels - 1) :
                      many_right(i, path >> 1, levels - 1);
}

/* The empty asm keeps each call from becoming a tail call (a jump leaves
   no frame to tell the paths apart). */
__attribute__((noinline)) void* many_left(size_t i, size_t path, int levels)
{
  void* p = many_object(i, path, levels);
  __asm__ volatile("" : : "r"(p) : "memory");
  return p;
}

__attribute__((noinline)) void* many_right(size_t i, size_t path, int levels)
{
  void* p = many_object(i, path, levels);
  __asm__ volatile("" : : "r"(p) : "memory");
  return p;
}

__attribute__((noinline)) void many_site(struct held* h, size_t n)
{
  h->n = n;
  h->p = calloc(n, sizeof(void*));
  h->stamp = 0;
  for (size_t i = 0; i < n; i++)
  {
    h->p[i] = many_object(i, i / 1000, 8);
    memset(h->p[i], 0, 16);
  }
}

/* Stamped churn: blocks of varied sizes, each checked before its free. */
__attribute__((noinline)) int work(double seconds)
{
  enum
  {
    SLOTS = 4096
  };
  static unsigned char* slot[SLOTS];
  static size_t size[SLOTS];
  struct timespec t0, t;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  uint64_t x = 88172645463325252ull;
  int ok = 1;
  for (long round = 0;; round++)
  {
    for (int k = 0; k < 1000; k++)
    {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      size_t i = x % SLOTS;
      if (slot[i] != NULL)
      {
        if (slot[i][0] != (unsigned char)i || slot[i][size[i] - 1] != (unsigned char)(i >> 3))
          ok = 0;
        free(slot[i]);
      }
      size[i] = 16 + (x >> 20) % 20000;
      slot[i] = malloc(size[i]);
      slot[i][0] = (unsigned char)i;
      slot[i][size[i] - 1] = (unsigned char)(i >> 3);
    }
    clock_gettime(CLOCK_MONOTONIC, &t);
    if ((double)(t.tv_sec - t0.tv_sec) + (double)(t.tv_nsec - t0.tv_nsec) * 1e-9 > seconds)
      break;
  }
  for (size_t i = 0; i < SLOTS; i++)
  {
    free(slot[i]);
    slot[i] = NULL;
  }
  return ok;
}

static int (*http_start)(const char*, uint16_t*);
static int (*http_stop)(void);
static uint16_t (*http_port)(void);

/* The status of GET /metrics from 127.0.0.1:port, 0 if none. */
static int get_metrics_status(uint16_t port)
{
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a;
  memset(&a, 0, sizeof(a));
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int status = 0;
  char reply[64] = "";
  static const char request[] = "GET /metrics HTTP/1.1\r\n\r\n";
  if (
    connect(fd, (struct sockaddr*)&a, sizeof(a)) == 0 &&
    write(fd, request, sizeof(request) - 1) == (ssize_t)(sizeof(request) - 1) &&
    read(fd, reply, sizeof(reply) - 1) > 12)
    sscanf(reply, "HTTP/1.1 %d", &status);
  close(fd);
  return status;
}

/* In a fork child: no server runs (the parent's thread was not copied),
   and the child can start one of its own. */
static int fork_child(void)
{
  if (http_port() != 0)
    return 1;
  uint16_t port = 0;
  if (http_start(":0", &port) != 0 || port == 0)
    return 2;
  if (get_metrics_status(port) != 200)
    return 3;
  if (http_stop() != 0 || http_port() != 0)
    return 4;
  return 0;
}

static void* peak_thread(void* unused)
{
  (void)unused;
  struct held p;
  peak_site(&p);
  release(&p);
  return NULL;
}

static void* work_thread(void* seconds)
{
  return work(*(double*)seconds) ? seconds : NULL;
}

int main(void)
{
  int (*profile_start)(size_t) = (int (*)(size_t))dlsym(RTLD_DEFAULT, "snmalloc_profile_start");
  http_start = (int (*)(const char*, uint16_t*))dlsym(RTLD_DEFAULT, "snmalloc_profile_http_start");
  http_stop = (int (*)(void))dlsym(RTLD_DEFAULT, "snmalloc_profile_http_stop");
  http_port = (uint16_t(*)(void))dlsym(RTLD_DEFAULT, "snmalloc_profile_http_port");
  if (profile_start == NULL || http_start == NULL || http_stop == NULL || http_port == NULL)
  {
    fprintf(stderr, "http_target: run me with libsnmallocshim-profile.so preloaded\n");
    return 2;
  }
  setvbuf(stdout, NULL, _IOLBF, 0);
  struct held a, b, grown = {0, NULL, 0}, many = {0, NULL, 0};
  site_a(&a);
  site_b(&b);
  printf("port %u\nready\n", (unsigned)http_port());
  char line[128];
  while (fgets(line, sizeof(line), stdin) != NULL)
  {
    if (strncmp(line, "grow", 4) == 0)
    {
      grow_site(&grown);
      printf("grown\n");
    }
    else if (strncmp(line, "peak", 4) == 0)
    {
      pthread_t t;
      pthread_create(&t, NULL, peak_thread, NULL);
      pthread_join(t, NULL);
      printf("peaked\n");
    }
    else if (strncmp(line, "many ", 5) == 0)
    {
      const char* rate = getenv("HTTP_TARGET_RATE");
      profile_start(1);
      many_site(&many, (size_t)atol(line + 5));
      profile_start(rate != NULL ? (size_t)atol(rate) : 524288);
      printf("many\n");
    }
    else if (strncmp(line, "work ", 5) == 0)
    {
      double seconds = atof(line + 5);
      void* ok = NULL;
      pthread_t t;
      pthread_create(&t, NULL, work_thread, &seconds);
      pthread_join(t, &ok);
      printf(ok != NULL ? "work ok\n" : "work CORRUPTED\n");
    }
    else if (strncmp(line, "check", 5) == 0)
      printf(intact(&a) && intact(&b) && intact(&grown) ? "heap ok\n" : "heap CORRUPTED\n");
    else if (strncmp(line, "fork", 4) == 0)
    {
      uint16_t port = http_port();
      pid_t child = fork();
      if (child == 0)
        _exit(fork_child());
      int status = -1;
      waitpid(child, &status, 0);
      if (WIFEXITED(status) && WEXITSTATUS(status) == 0 && http_port() == port &&
          get_metrics_status(port) == 200)
        printf("fork ok\n");
      else
        printf("fork FAILED: child status %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    }
    else if (strncmp(line, "quit", 4) == 0)
      break;
    else
      printf("unknown command\n");
  }
  release(&a);
  release(&b);
  release(&grown);
  release(&many);
  return 0;
}
