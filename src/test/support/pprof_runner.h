// Runs commands for tests: any shell command with its output captured, and
// the real profile reader, `go tool pprof`.  The one place tests find go.
#pragma once

#include <string>

namespace snmalloc_test
{
  struct CommandResult
  {
    int exit_status; // -1 when the command did not exit normally
    std::string output; // stdout
    std::string errors; // stderr
  };

  // Runs `command` with sh; fails the test only if it cannot be started.
  CommandResult run_command(const std::string& command);

  // Path of the `go` command (PATH, then /usr/bin and /usr/lib/go/bin), or
  // "".
  std::string find_go();

  // Runs `go tool pprof <arguments>`, whatever its exit status.  Fails the
  // test when go is missing: these tests must not pass without the real
  // reader.
  CommandResult pprof(const std::string& arguments);

  // A pprof run that must succeed (the test fails, showing pprof's stderr,
  // when it does not); returns its stdout.
  std::string pprof_ok(const std::string& arguments);
} // namespace snmalloc_test
