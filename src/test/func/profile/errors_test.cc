// Failures come back as errno values, through the C++ and the C API, and a
// failed dump leaves no file (and no temporary file) behind.
#include "support/files.h"
#include "support/pprof_output.h"
#include "support/profiling.h"

#include <catch2/catch.hpp>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace snmalloc_test;

extern "C" int snmalloc_profile_start(size_t mean_interval_bytes);
extern "C" int snmalloc_profile_is_active(void);
extern "C" int snmalloc_profile_dump(const char* path);
extern "C" int snmalloc_profile_dump_fd(int fd);
extern "C" int snmalloc_profile_set_max_depth(size_t depth);

namespace
{
  void check_dump_error(const std::string& path, int expected)
  {
    INFO("dump(\"" << path.substr(0, 200) << "\")");
    snmalloc::profile::DumpResult result = snmalloc::profile::dump(path.c_str());
    CHECK(result.error == expected);
    CHECK_FALSE(result.ok());
    CHECK(std::string(result.message()) == std::strerror(expected));
    CHECK(snmalloc_profile_dump(path.c_str()) == expected);
  }

  void check_fd_error(int fd, int expected)
  {
    INFO("dump(fd " << fd << ")");
    CHECK(snmalloc::profile::dump(fd).error == expected);
    CHECK(snmalloc_profile_dump_fd(fd) == expected);
  }
} // namespace

TEST_CASE("dump to a path that cannot be written returns its errno and leaves no file")
{
  ProfilingAt sampling(4096);
  TempDir dir;

  check_dump_error("/proc/nonexistent/x.pb.gz", ENOENT);

  check_dump_error(dir.file("missing/x.pb.gz"), ENOENT);
  CHECK_FALSE(file_exists(dir.file("missing")));

  // A path through a regular file.
  int fd = open(dir.file("file").c_str(), O_WRONLY | O_CREAT, 0644);
  REQUIRE(fd >= 0);
  close(fd);
  check_dump_error(dir.file("file/x.pb.gz"), ENOTDIR);

  // The temporary file is written, then cannot be renamed over a
  // directory: it must be removed.
  REQUIRE(mkdir(dir.file("directory").c_str(), 0755) == 0);
  check_dump_error(dir.file("directory"), EISDIR);

  check_dump_error(dir.file(std::string(5000, 'x')), ENAMETOOLONG);

  CHECK(dir.entries() == std::vector<std::string>{"directory", "file"});
}

TEST_CASE("dump without a path or descriptor is invalid")
{
  CHECK(snmalloc::profile::dump(static_cast<const char*>(nullptr)).error == EINVAL);
  CHECK(snmalloc::profile::dump("").error == EINVAL);
  CHECK(snmalloc_profile_dump(nullptr) == EINVAL);
  CHECK(snmalloc_profile_dump("") == EINVAL);
  check_fd_error(-1, EBADF);
}

TEST_CASE("dump to a descriptor that cannot be written returns its errno")
{
  ProfilingAt sampling(4096);
  TempDir dir;

  // Closed.
  int closed = open(dir.file("closed").c_str(), O_WRONLY | O_CREAT, 0644);
  REQUIRE(closed >= 0);
  close(closed);
  check_fd_error(closed, EBADF);

  // Open for reading only.
  int read_only = open(dir.file("closed").c_str(), O_RDONLY);
  REQUIRE(read_only >= 0);
  check_fd_error(read_only, EBADF);
  close(read_only);

  // A full device.
  int full = open("/dev/full", O_WRONLY);
  REQUIRE(full >= 0);
  check_fd_error(full, ENOSPC);
  close(full);

  // A pipe nobody reads (SIGPIPE ignored, as a program that handles write
  // errors does).
  int ends[2];
  REQUIRE(pipe(ends) == 0);
  close(ends[0]);
  auto previous = std::signal(SIGPIPE, SIG_IGN);
  check_fd_error(ends[1], EPIPE);
  std::signal(SIGPIPE, previous);
  close(ends[1]);
}

TEST_CASE("a dump replaces an existing file and leaves only it")
{
  ProfilingAt sampling(4096);
  TempDir dir;
  std::string path = dir.file("x.pb.gz");
  int fd = open(path.c_str(), O_WRONLY | O_CREAT, 0644);
  REQUIRE(fd >= 0);
  REQUIRE(write(fd, "old", 3) == 3);
  close(fd);

  dump_or_fail(path);
  dump_or_fail(path);
  CHECK(dir.entries() == std::vector<std::string>{"x.pb.gz"});
  CHECK(read_raw(path).period == 4096);

  // To a descriptor: the same profile, readable.
  std::string through_fd = dir.file("fd.pb.gz");
  fd = open(through_fd.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  REQUIRE(fd >= 0);
  CHECK(snmalloc::profile::dump(fd).ok());
  close(fd);
  CHECK(read_raw(through_fd).period == 4096);
}

TEST_CASE("start(0) and out-of-range depths are invalid and change nothing")
{
  REQUIRE_FALSE(snmalloc::profile::is_active());
  CHECK(snmalloc::profile::start(0) == EINVAL);
  CHECK(snmalloc_profile_start(0) == EINVAL);
  CHECK_FALSE(snmalloc::profile::is_active());
  CHECK(snmalloc_profile_is_active() == 0);

  {
    ProfilingAt sampling(12345);
    CHECK(snmalloc::profile::start(0) == EINVAL);
    CHECK(snmalloc_profile_start(0) == EINVAL);
    CHECK(snmalloc::profile::is_active());
    CHECK(snmalloc::profile::interval() == 12345);
  }

  CHECK(snmalloc::profile::set_max_depth(0) == EINVAL);
  CHECK(snmalloc::profile::set_max_depth(snmalloc::profile::MAX_DEPTH + 1) == EINVAL);
  CHECK(snmalloc_profile_set_max_depth(0) == EINVAL);
  CHECK(snmalloc::profile::set_max_depth(snmalloc::profile::MAX_DEPTH) == 0);
  CHECK(snmalloc_profile_set_max_depth(snmalloc::profile::DEFAULT_DEPTH) == 0);
}
