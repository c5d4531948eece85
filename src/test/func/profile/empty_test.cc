// Profiles with no samples: a dump before start() was ever called, and one
// right after start() before anything was sampled, are valid profiles that
// pprof reads.  Its own process, so that start() has never been called.
#include "support/files.h"
#include "support/pprof_output.h"
#include "support/pprof_runner.h"
#include "support/profiling.h"

#include <catch2/catch.hpp>
#include <fcntl.h>
#include <unistd.h>

using namespace snmalloc_test;

namespace
{
  void check_empty(const std::string& path, int64_t period)
  {
    INFO(path);
    RawProfile raw = read_raw(path);
    CHECK(raw.period_type == "space bytes");
    CHECK(raw.period == period);
    CHECK(
      raw.sample_types ==
      "alloc_objects/count alloc_space/bytes inuse_objects/count inuse_space/bytes[dflt]");
    CHECK(raw.samples.empty());
    // The summary views accept it too.
    CHECK(pprof(std::string("-top '") + self_exe() + "' '" + path + "'").exit_status == 0);
    CHECK(read_traces(path, "inuse_space").empty());
  }
} // namespace

TEST_CASE("a dump before start() and one with nothing sampled are valid profiles")
{
  REQUIRE_FALSE(snmalloc::profile::is_active());
  TempDir dir;

  // Never started: the period is the default interval.
  dump_or_fail(dir.file("never-started.pb.gz"));
  int fd = open(dir.file("never-started-fd.pb.gz").c_str(), O_WRONLY | O_CREAT, 0644);
  REQUIRE(fd >= 0);
  REQUIRE(snmalloc::profile::dump(fd).ok());
  close(fd);
  check_empty(dir.file("never-started.pb.gz"), snmalloc::profile::DEFAULT_INTERVAL);
  check_empty(dir.file("never-started-fd.pb.gz"), snmalloc::profile::DEFAULT_INTERVAL);

  // Started with an interval of 1 TiB: the few megabytes at most that
  // this thread's refills hand out before the dump contain a sample point
  // with probability about one in a million.
  {
    constexpr size_t huge_interval = size_t(1) << 40;
    ProfilingAt rarely(huge_interval);
    dump_or_fail(dir.file("nothing-sampled.pb.gz"));
    check_empty(dir.file("nothing-sampled.pb.gz"), int64_t(huge_interval));
  }
}
