#pragma once
// What the fork tests of this folder share: children forked one after
// another while the parent's other threads run, each under an alarm (a
// child stuck on a lock its parent's threads held ends with SIGALRM).
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

// Forks `forks` children in turn; child `round` exits with `child(round)`,
// 0 for success.  The number of children that did not exit with 0, or -1
// when fork() failed.
static inline int fork_children(int forks, unsigned limit_s, int (*child)(int round))
{
  int failures = 0;
  for (int f = 0; f < forks; f++)
  {
    pid_t pid = fork();
    if (pid < 0)
      return -1;
    if (pid == 0)
    {
      alarm(limit_s);
      _exit(child(f));
    }
    int status = 0;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
    {
      fprintf(stderr, "fork %d: child status %#x\n", f, status);
      failures++;
    }
  }
  return failures;
}
