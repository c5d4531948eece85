#include "test_support.h"

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <dirent.h>
#include <fstream>
#include <snmalloc/profile/pprof/dump_file.h>
#include <sstream>
#include <sys/wait.h>
#include <unistd.h>

namespace pprof_test
{
  std::string find_go()
  {
    std::string directories = getenv("PATH") ? getenv("PATH") : "";
    directories += ":/usr/lib/go/bin";
    std::stringstream list(directories);
    for (std::string directory; std::getline(list, directory, ':');)
    {
      std::string candidate = (directory.empty() ? "." : directory) + "/go";
      if (access(candidate.c_str(), X_OK) == 0)
        return candidate;
    }
    return {};
  }

  std::string read_file(const std::string& path)
  {
    std::ifstream file(path, std::ios::binary);
    std::stringstream contents;
    contents << file.rdbuf();
    return contents.str();
  }

  CommandResult run_command(const std::string& command)
  {
    char errors_path[] = "/tmp/pprof-test-stderr-XXXXXX";
    int errors_fd = mkstemp(errors_path);
    REQUIRE(errors_fd >= 0);
    close(errors_fd);

    std::string full = command + " 2>" + errors_path;
    FILE* pipe = popen(full.c_str(), "r");
    REQUIRE(pipe != nullptr);
    CommandResult result{};
    char buffer[65536];
    for (size_t n; (n = fread(buffer, 1, sizeof(buffer), pipe)) > 0;)
      result.output.append(buffer, n);
    int status = pclose(pipe);
    result.exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    result.errors = read_file(errors_path);
    unlink(errors_path);
    return result;
  }

  CommandResult run_pprof(const std::string& arguments)
  {
    static const std::string go = find_go();
    INFO("go was not found in PATH nor in /usr/lib/go/bin");
    REQUIRE(!go.empty());
    CommandResult result = run_command(go + " tool pprof " + arguments);
    INFO("go tool pprof " << arguments << "\nstderr:\n" << result.errors);
    REQUIRE(result.exit_status == 0);
    return result;
  }

  TemporaryDirectory::TemporaryDirectory()
  {
    char pattern[] = "/tmp/pprof-test-XXXXXX";
    REQUIRE(mkdtemp(pattern) != nullptr);
    path_ = pattern;
  }

  TemporaryDirectory::~TemporaryDirectory()
  {
    for (const std::string& entry : entries())
    {
      std::string full = path_ + "/" + entry;
      if (unlink(full.c_str()) != 0)
        rmdir(full.c_str());
    }
    rmdir(path_.c_str());
  }

  std::vector<std::string> TemporaryDirectory::entries() const
  {
    std::vector<std::string> names;
    DIR* directory = opendir(path_.c_str());
    if (directory == nullptr)
      return names;
    while (dirent* entry = readdir(directory))
    {
      std::string name = entry->d_name;
      if (name != "." && name != "..")
        names.push_back(name);
    }
    closedir(directory);
    return names;
  }

  void write_profile(
    const std::string& path,
    const snmalloc::profile::ProfileHeader& header,
    const std::vector<snmalloc::profile::ProfileBucket>& buckets)
  {
    std::vector<uint8_t> encoded;
    snmalloc::profile::encode_pprof(header, buckets.data(), buckets.size(), encoded);
    REQUIRE(
      snmalloc::profile::write_gzip_file_atomic(
        path.c_str(), encoded.data(), encoded.size()) == 0);
  }
}
