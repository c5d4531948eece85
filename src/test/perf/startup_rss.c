/* Start-up footprint: where a small program's resident memory goes under
 * an allocator (run it with LD_PRELOAD).  Allocates N blocks of 16..1040
 * bytes (default 0: only what libc itself allocates), writes them, then
 * prints peak and current RSS split into anonymous and file-backed pages,
 * and with --smaps every mapping of 8 KiB or more resident.
 *
 *   LD_PRELOAD=build/off/libsnmallocshim.so perf-startup-rss 2000 --smaps
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_BLOCKS = 100000 };

static void print_status(void)
{
  FILE* f = fopen("/proc/self/status", "r");
  char line[256];
  if (f == NULL)
    exit(1);
  while (fgets(line, sizeof line, f) != NULL)
    if (strncmp(line, "VmHWM", 5) == 0 || strncmp(line, "VmRSS", 5) == 0 ||
        strncmp(line, "RssAnon", 7) == 0 || strncmp(line, "RssFile", 7) == 0)
      fputs(line, stdout);
  fclose(f);
}

/* Mappings with at least 8 KiB resident: "KiB start-end perms ... path". */
static void print_smaps(void)
{
  FILE* f = fopen("/proc/self/smaps", "r");
  char line[512], mapping[512] = "";
  if (f == NULL)
    exit(1);
  while (fgets(line, sizeof line, f) != NULL)
  {
    if (strncmp(line, "Rss:", 4) == 0)
    {
      int kib = atoi(line + 4);
      if (kib >= 8)
        printf("%6d KiB %s", kib, mapping);
    }
    else if (strchr(line, ':') == NULL || strchr(line, '-') < strchr(line, ':'))
    {
      /* A mapping's header: "start-end perms offset dev inode [path]". */
      if (strchr(line, '-') != NULL && line[0] != ' ')
        strcpy(mapping, line);
    }
  }
  fclose(f);
}

int main(int argc, char** argv)
{
  static void* blocks[MAX_BLOCKS];
  size_t n = 0;
  int smaps = 0;
  for (int i = 1; i < argc; i++)
  {
    if (strcmp(argv[i], "--smaps") == 0)
      smaps = 1;
    else if (strcmp(argv[i], "--smoke") == 0)
      n = 100;
    else
      n = strtoul(argv[i], NULL, 10);
  }
  if (n > MAX_BLOCKS)
    n = MAX_BLOCKS;
  for (size_t i = 0; i < n; i++)
  {
    size_t size = 16 + (i * 37) % 1024;
    blocks[i] = malloc(size);
    if (blocks[i] == NULL)
      return 1;
    memset(blocks[i], (int)i, size);
  }
  print_status();
  if (smaps)
    print_smaps();
  for (size_t i = 0; i < n; i++)
    free(blocks[i]);
  return 0;
}
