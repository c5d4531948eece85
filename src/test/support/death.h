// Death tests: run code in a forked child (a bad free, a signal flood) and
// read what it left on stderr and how it ended.
#pragma once

#include "support/files.h"

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <signal.h>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <utility>

namespace snmalloc_test
{
  struct ChildEnd
  {
    int signal = 0; // 0 when the child exited
    int exit_code = 0;
    std::string stderr_text;
  };

  // Runs f in a child whose stderr goes to a pipe read here.
  template<typename F>
  ChildEnd run_in_child(F&& f)
  {
    int fds[2];
    if (::pipe(fds) != 0)
      return {-1, -1, "pipe failed"};
    pid_t pid = ::fork();
    if (pid == 0)
    {
      // The child dies by the signal itself, not through the test
      // framework's handlers.
      for (int sig : {SIGABRT, SIGSEGV, SIGILL, SIGBUS, SIGFPE, SIGTRAP})
        ::signal(sig, SIG_DFL);
      ::dup2(fds[1], 2);
      ::close(fds[0]);
      ::close(fds[1]);
      f();
      ::_exit(0);
    }
    ::close(fds[1]);
    ChildEnd end;
    char buffer[512];
    ssize_t n;
    while ((n = ::read(fds[0], buffer, sizeof(buffer))) > 0)
      end.stderr_text.append(buffer, size_t(n));
    ::close(fds[0]);
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (WIFSIGNALED(status))
      end.signal = WTERMSIG(status);
    else
      end.exit_code = WEXITSTATUS(status);
    return end;
  }

  // The exit status of a hidden test case run by reexec_ran_clean when it
  // reached its end (an unknown test name would exit with 0).
  constexpr int RAN_CLEAN = 42;

  // Runs this executable's test case `name` in a child process, calling
  // prepare() in the child before the exec; true if it exited RAN_CLEAN.
  // Under an emulator (SNMALLOC_TEST_EMULATOR, set by the cross build's
  // cmake/toolchains/qemu-aarch64-run.sh) the child is run through it: the
  // kernel cannot run this executable itself.
  template<typename F>
  bool reexec_ran_clean(const char* name, F prepare)
  {
    const char* emulator = std::getenv("SNMALLOC_TEST_EMULATOR");
    std::string self = emulator != nullptr ? self_exe() : std::string();
    pid_t child = ::fork();
    if (child == 0)
    {
      prepare();
      if (emulator != nullptr)
        ::execl(emulator, emulator, self.c_str(), name, static_cast<char*>(nullptr));
      else
        ::execl("/proc/self/exe", "child", name, static_cast<char*>(nullptr));
      ::_exit(127);
    }
    int status = 0;
    ::waitpid(child, &status, 0);
    return WIFEXITED(status) && WEXITSTATUS(status) == RAN_CLEAN;
  }

  // The one line a bad free of `p` must print: "<what> 0x<hex>"; other
  // diagnostics than free()'s have another `prefix`.
  inline std::string fatal_line(const char* what, const void* p, const char* prefix = "free(): ")
  {
    char line[200];
    std::snprintf(line, sizeof(line), "snmalloc: fatal: %s%s %p\n", prefix, what, p);
    return line;
  }

  inline void* hide(void* p)
  {
    asm volatile("" : "+r"(p));
    return p;
  }

  inline void* offset(void* p, size_t bytes)
  {
    return hide(static_cast<char*>(p) + bytes);
  }

  // The child ends with SIGABRT and exactly the line for `what` at `p`.
  template<typename F>
  void check_dies(F&& f, const char* what, const void* p)
  {
    ChildEnd end = run_in_child(std::forward<F>(f));
    CHECK(end.signal == SIGABRT);
    CHECK(end.stderr_text == fatal_line(what, p));
  }

  // For pointers only the child knows: the child calls f(tell), where
  // tell(p) passes p back through a pipe; its end, and the p it told.
  template<typename F>
  std::pair<ChildEnd, void*> run_telling(F&& f)
  {
    int fds[2];
    REQUIRE(::pipe(fds) == 0);
    ChildEnd end = run_in_child([&] {
      ::close(fds[0]);
      f([&](void* p) { (void)!::write(fds[1], &p, sizeof(p)); });
      ::_exit(3); // not caught
    });
    ::close(fds[1]);
    void* told = nullptr;
    CHECK(::read(fds[0], &told, sizeof(told)) == sizeof(told));
    ::close(fds[0]);
    return {end, told};
  }

  // The child ends with SIGABRT and exactly the line for `what` at the p
  // it told.
  template<typename F>
  void check_dies_naming(F&& f, const char* what, const char* prefix = "free(): ")
  {
    auto [end, told] = run_telling(std::forward<F>(f));
    CHECK(end.exit_code == 0);
    CHECK(end.signal == SIGABRT);
    CHECK(end.stderr_text == fatal_line(what, told, prefix));
  }
} // namespace snmalloc_test
