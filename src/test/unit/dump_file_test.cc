// gzip and the atomic file write: contents, failures, and what a failure
// leaves behind.

#include "support/files.h"

#include <catch2/catch.hpp>
#include <fcntl.h>
#include <snmalloc/profile/pprof/dump_file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

using namespace snmalloc::profile;
using snmalloc_test::TempDir;

namespace
{
  // Bytes that deflate cannot shrink much, over several 64 KiB chunks.
  std::vector<uint8_t> sample_bytes(size_t count)
  {
    std::vector<uint8_t> bytes(count);
    uint64_t state = 0x9e3779b97f4a7c15;
    for (uint8_t& byte : bytes)
    {
      state ^= state << 13;
      state ^= state >> 7;
      state ^= state << 17;
      byte = static_cast<uint8_t>(state);
    }
    return bytes;
  }

  std::vector<uint8_t> gunzip_file(const std::string& path)
  {
    gzFile file = gzopen(path.c_str(), "rb");
    REQUIRE(file != nullptr);
    REQUIRE(gzdirect(file) == 0); // It is gzip, not plain bytes.
    std::vector<uint8_t> contents;
    uint8_t buffer[65536];
    int n;
    while ((n = gzread(file, buffer, sizeof(buffer))) > 0)
      contents.insert(contents.end(), buffer, buffer + n);
    CHECK(n == 0);
    gzclose(file);
    return contents;
  }

  bool exists(const std::string& path)
  {
    struct stat status;
    return lstat(path.c_str(), &status) == 0;
  }
}

TEST_CASE("write_gzip_fd writes gzip that inflates to the input", "[dump_file]")
{
  TempDir directory;
  std::string path = directory.path() + "/out.gz";
  for (size_t size : {size_t{0}, size_t{1}, size_t{300000}})
  {
    std::vector<uint8_t> data = sample_bytes(size);
    int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    REQUIRE(fd >= 0);
    CHECK(write_gzip_fd(fd, data.data(), data.size()) == 0);
    close(fd);
    CHECK(gunzip_file(path) == data);
  }
}

TEST_CASE("write_gzip_fd reports the write error", "[dump_file]")
{
  std::vector<uint8_t> data = sample_bytes(1000);
  int fd = open("/dev/null", O_RDONLY);
  REQUIRE(fd >= 0);
  CHECK(write_gzip_fd(fd, data.data(), data.size()) == EBADF);
  close(fd);

  int full = open("/dev/full", O_WRONLY);
  REQUIRE(full >= 0);
  CHECK(write_gzip_fd(full, data.data(), data.size()) == ENOSPC);
  close(full);
}

TEST_CASE("write_gzip_file_atomic replaces the file and leaves nothing else", "[dump_file]")
{
  TempDir directory;
  std::string path = directory.path() + "/heap.pb.gz";
  std::vector<uint8_t> first = sample_bytes(100000);
  std::vector<uint8_t> second = sample_bytes(5);

  REQUIRE(write_gzip_file_atomic(path.c_str(), first.data(), first.size()) == 0);
  CHECK(gunzip_file(path) == first);
  REQUIRE(write_gzip_file_atomic(path.c_str(), second.data(), second.size()) == 0);
  CHECK(gunzip_file(path) == second);
  CHECK(directory.entries() == std::vector<std::string>{"heap.pb.gz"});
}

TEST_CASE("an unwritable path fails with errno and leaves no file", "[dump_file]")
{
  std::vector<uint8_t> data = sample_bytes(100);

  SECTION("under /proc")
  {
    const char* path = "/proc/nonexistent/x.pb.gz";
    CHECK(write_gzip_file_atomic(path, data.data(), data.size()) == ENOENT);
    CHECK_FALSE(exists(path));
  }

  SECTION("in a directory that does not exist")
  {
    TempDir directory;
    std::string path = directory.path() + "/missing/x.pb.gz";
    CHECK(write_gzip_file_atomic(path.c_str(), data.data(), data.size()) == ENOENT);
    CHECK(directory.entries().empty());
  }

  SECTION("when the rename fails, the temporary file is removed")
  {
    // The temporary file can be created and written, but a file cannot be
    // renamed over a directory.
    TempDir directory;
    std::string path = directory.path() + "/is-a-directory";
    REQUIRE(mkdir(path.c_str(), 0700) == 0);
    CHECK(write_gzip_file_atomic(path.c_str(), data.data(), data.size()) == EISDIR);
    CHECK(directory.entries() == std::vector<std::string>{"is-a-directory"});
  }

  SECTION("a name too long for the temporary file")
  {
    std::string path = "/tmp/" + std::string(5000, 'x');
    CHECK(write_gzip_file_atomic(path.c_str(), data.data(), data.size()) == ENAMETOOLONG);
  }
}
