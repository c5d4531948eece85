// Waiting for a forked child with a time limit: a test whose child hangs
// (on a lock its parent's threads held at the fork) fails with a name
// rather than running into ctest's timeout.  Header only, without Catch2,
// for the stress programs too.
#pragma once

#include <chrono>
#include <csignal>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

namespace snmalloc_test
{
  // The child's wait status, or -1 when it had not ended within `limit`
  // (it is then killed and reaped), -2 when it cannot be waited for.
  inline int wait_with_limit(pid_t child, std::chrono::milliseconds limit)
  {
    auto deadline = std::chrono::steady_clock::now() + limit;
    for (;;)
    {
      int status = 0;
      pid_t done = ::waitpid(child, &status, WNOHANG);
      if (done == child)
        return status;
      if (done < 0)
        return -2;
      if (std::chrono::steady_clock::now() >= deadline)
      {
        ::kill(child, SIGKILL);
        ::waitpid(child, &status, 0);
        return -1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }

  // Did the child exit with status 0?
  inline bool exited_cleanly(int status)
  {
    return status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
} // namespace snmalloc_test
