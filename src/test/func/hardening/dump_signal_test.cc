// The dump-on-signal pipe across fork() (profiling builds).  Run with
// SNMALLOC_PROFILE=...,path=$DIR/heap.%p.%n.pb.gz,dump_on_signal=SIGUSR2 in
// the environment, DIR an empty directory (ctest sets both).
#include "support/death.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <dirent.h>
#include <fcntl.h>
#include <map>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <vector>
#include <unistd.h>

namespace
{
  const char* dump_dir()
  {
    const char* dir = std::getenv("HARDENING_DUMP_DIR");
    REQUIRE(dir != nullptr);
    return dir;
  }

  // Dumps in the directory written by process `pid`.
  int dumps_of(pid_t pid)
  {
    std::string prefix = "heap." + std::to_string(pid) + ".";
    int n = 0;
    DIR* d = ::opendir(dump_dir());
    REQUIRE(d != nullptr);
    while (dirent* e = ::readdir(d))
      n += std::string(e->d_name).rfind(prefix, 0) == 0;
    ::closedir(d);
    return n;
  }

  // Waits up to ten seconds for `pid` to have written `n` dumps.
  bool wait_for_dumps(pid_t pid, int n)
  {
    for (int i = 0; i < 1000 && dumps_of(pid) < n; i++)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return dumps_of(pid) >= n;
  }
} // namespace

TEST_CASE("the dump pipe closes on exec, its write end never blocks", "[dump-signal]")
{
  // The profiler's pipe has both its read and its write end open here
  // (ctest's output pipe has one, maybe twice); every such pipe is checked.
  std::map<std::string, std::vector<int>> ends;
  for (int fd = 0; fd < 1024; fd++)
  {
    char link[64], target[64];
    std::snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
    ssize_t n = ::readlink(link, target, sizeof(target) - 1);
    if (n <= 0)
      continue;
    target[n] = '\0';
    if (std::string(target).rfind("pipe:", 0) == 0)
      ends[target].push_back(fd);
  }
  int pairs = 0;
  for (const auto& [pipe, fds] : ends)
  {
    if (fds.size() != 2 ||
        (::fcntl(fds[0], F_GETFL) & O_ACCMODE) == (::fcntl(fds[1], F_GETFL) & O_ACCMODE))
      continue;
    pairs++;
    for (int fd : fds)
    {
      CHECK((::fcntl(fd, F_GETFD) & FD_CLOEXEC) != 0);
      int flags = ::fcntl(fd, F_GETFL);
      if ((flags & O_ACCMODE) == O_WRONLY)
        CHECK((flags & O_NONBLOCK) != 0);
    }
  }
  CHECK(pairs >= 1);
}

TEST_CASE("a signal to a fork() child makes nobody dump", "[dump-signal]")
{
  pid_t parent = ::getpid();
  int before = dumps_of(parent);
  int go[2];
  REQUIRE(::pipe(go) == 0);
  pid_t child = ::fork();
  if (child == 0)
  {
    // Wait until the parent has signalled us, allocate, and exit.
    char byte;
    (void)!::read(go[0], &byte, 1);
    std::free(std::malloc(100));
    ::_exit(0);
  }
  for (int i = 0; i < 5; i++)
    ::kill(child, SIGUSR2);
  (void)!::write(go[1], "x", 1);
  int status = 0;
  ::waitpid(child, &status, 0);
  ::close(go[0]);
  ::close(go[1]);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  // Had the child's handler fed the parent's pipe, the parent would dump.
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  CHECK(dumps_of(parent) == before);
  CHECK(dumps_of(child) == 0);
  // The parent's own signal still dumps: the check above could fail.
  ::raise(SIGUSR2);
  CHECK(wait_for_dumps(parent, before + 1));
}

TEST_CASE("dump pipe flood (child)", "[.flood]")
{
  // Far more signals than the pipe holds, faster than dumps run: a blocking
  // write end would hang in the handler (the alarm, set by the parent,
  // would then kill us).
  for (int i = 0; i < 200000; i++)
    ::raise(SIGUSR2);
  ::_exit(snmalloc_test::RAN_CLEAN);
}

TEST_CASE("a flood of dump signals never blocks the handler", "[dump-signal]")
{
  CHECK(snmalloc_test::reexec_ran_clean("dump pipe flood (child)", [] { ::alarm(60); }));
}
