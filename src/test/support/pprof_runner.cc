#include "support/pprof_runner.h"

#include "support/files.h"

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <sys/wait.h>
#include <unistd.h>

namespace snmalloc_test
{
  CommandResult run_command(const std::string& command)
  {
    char errors_path[] = "/tmp/snmalloc-test-stderr.XXXXXX";
    int errors_fd = mkstemp(errors_path);
    REQUIRE(errors_fd >= 0);
    close(errors_fd);

    std::string full = command + " 2>" + errors_path;
    FILE* pipe = popen(full.c_str(), "r");
    REQUIRE(pipe != nullptr);
    CommandResult result{-1, "", ""};
    char buffer[65536];
    for (size_t n; (n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0;)
      result.output.append(buffer, n);
    int status = pclose(pipe);
    result.exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    result.errors = read_file(errors_path);
    unlink(errors_path);
    return result;
  }

  std::string find_go()
  {
    const char* env = std::getenv("PATH");
    std::string directories = env != nullptr ? env : "";
    directories += ":/usr/bin:/usr/lib/go/bin";
    std::stringstream list(directories);
    for (std::string directory; std::getline(list, directory, ':');)
    {
      std::string candidate = (directory.empty() ? "." : directory) + "/go";
      if (access(candidate.c_str(), X_OK) == 0)
        return candidate;
    }
    return "";
  }

  CommandResult pprof(const std::string& arguments)
  {
    static const std::string go = find_go();
    INFO("go was found neither in PATH nor in /usr/bin or /usr/lib/go/bin");
    REQUIRE(!go.empty());
    return run_command(go + " tool pprof " + arguments);
  }

  std::string pprof_ok(const std::string& arguments)
  {
    CommandResult result = pprof(arguments);
    INFO("go tool pprof " << arguments << "\nstderr:\n" << result.errors);
    REQUIRE(result.exit_status == 0);
    return result.output;
  }
} // namespace snmalloc_test
