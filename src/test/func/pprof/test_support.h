#pragma once
// Shared by the pprof encoder tests: call sites to use as stack frames, and
// a way to run `go tool pprof` on what was written.

#include <cstdint>
#include <snmalloc/profile/pprof/pprof_encoder.h>
#include <string>
#include <vector>

// A return address in this binary and the source line of its call.
struct CallSite
{
  uintptr_t return_address;
  int line;
};

// Real functions of this binary to use as stack frames (stack_sites.cc,
// built with -g so pprof can find their lines). Each returns a call site
// inside itself.
CallSite pprof_site_leaf();
CallSite pprof_site_middle();
CallSite pprof_site_root();

namespace snmalloc
{
  // Stands for an allocator frame: its name matches the drop_frames regex.
  CallSite pprof_test_allocator_frame();
}

namespace pprof_test
{
  // A call site inside a function with internal linkage (which dladdr
  // cannot name).
  CallSite call_site_in_pprof_static_site();

  // Path of the `go` command (PATH, then /usr/lib/go/bin), or "".
  std::string find_go();

  struct CommandResult
  {
    int exit_status;
    std::string output; // stdout; stderr goes to `errors`.
    std::string errors;
  };
  CommandResult run_command(const std::string& command);

  // `go tool pprof <arguments>`; fails the test if go is missing.
  CommandResult run_pprof(const std::string& arguments);

  // A fresh empty directory under /tmp, removed with its contents when the
  // TemporaryDirectory goes.
  class TemporaryDirectory
  {
    std::string path_;

  public:
    TemporaryDirectory();
    ~TemporaryDirectory();
    const std::string& path() const
    {
      return path_;
    }
    std::vector<std::string> entries() const;
  };

  std::string read_file(const std::string& path);

  // Encodes, gzips and writes atomically to `path`; fails the test on error.
  void write_profile(
    const std::string& path,
    const snmalloc::profile::ProfileHeader& header,
    const std::vector<snmalloc::profile::ProfileBucket>& buckets);
}
