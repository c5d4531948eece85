#include "support/files.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

namespace snmalloc_test
{
  TempDir::TempDir()
  {
    char pattern[] = "/tmp/snmalloc-test.XXXXXX";
    REQUIRE(mkdtemp(pattern) != nullptr);
    path_ = pattern;
  }

  TempDir::~TempDir()
  {
    if (std::getenv("SNMALLOC_TEST_KEEP") != nullptr)
    {
      std::fprintf(stderr, "kept %s\n", path_.c_str());
      return;
    }
    std::string command = "rm -rf '" + path_ + "'";
    if (std::system(command.c_str()) != 0)
      std::fprintf(stderr, "could not remove %s\n", path_.c_str());
  }

  std::vector<std::string> TempDir::entries() const
  {
    std::vector<std::string> names;
    DIR* dir = opendir(path_.c_str());
    REQUIRE(dir != nullptr);
    while (dirent* e = readdir(dir))
    {
      std::string name = e->d_name;
      if (name != "." && name != "..")
        names.push_back(name);
    }
    closedir(dir);
    std::sort(names.begin(), names.end());
    return names;
  }

  bool file_exists(const std::string& path)
  {
    struct stat st;
    return stat(path.c_str(), &st) == 0;
  }

  std::string read_file(const std::string& path)
  {
    std::string text;
    if (FILE* f = std::fopen(path.c_str(), "rb"))
    {
      char buffer[65536];
      size_t n;
      while ((n = std::fread(buffer, 1, sizeof(buffer), f)) > 0)
        text.append(buffer, n);
      std::fclose(f);
    }
    return text;
  }

  std::string self_exe()
  {
    char path[4096];
    ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
    REQUIRE(n > 0);
    return std::string(path, size_t(n));
  }
} // namespace snmalloc_test
