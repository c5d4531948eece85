// Files for tests: a temporary directory that cleans up after itself, a
// whole file read into a string, and the path of the test executable.
#pragma once

#include <string>
#include <vector>

namespace snmalloc_test
{
  // A fresh directory under /tmp, removed with its contents at scope end
  // (kept, and its path printed, when SNMALLOC_TEST_KEEP is set).
  class TempDir
  {
    std::string path_;

  public:
    TempDir();
    ~TempDir();
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;

    const std::string& path() const
    {
      return path_;
    }

    std::string file(const std::string& name) const
    {
      return path_ + "/" + name;
    }

    // Names in the directory, sorted, without "." and "..".
    std::vector<std::string> entries() const;
  };

  bool file_exists(const std::string& path);

  // The whole file; "" when it cannot be read.
  std::string read_file(const std::string& path);

  // Path of this test executable: pprof reads its symbols and build ID.
  std::string self_exe();
} // namespace snmalloc_test
