// Profiles encoded from real stacks of this binary, written to a file and
// read back with `go tool pprof`: the way people will look at them.

#include "support/stack_sites.h"
#include "support/files.h"
#include "support/pprof_runner.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <fcntl.h>
#include <regex>
#include <snmalloc/profile/pprof/dump_file.h>
#include <snmalloc/profile/pprof/pprof_encoder.h>
#include <unistd.h>

using namespace snmalloc::profile;
using namespace snmalloc_test;

namespace
{
  constexpr uint64_t period = 512 * 1024;
  constexpr int64_t time_nanos = 1700000000LL * 1000000000LL;
  constexpr int64_t duration_nanos = 5LL * 1000000000LL;

  // Three buckets over two stacks; values are not whole numbers, as the
  // unbiased estimates are not.
  struct TestProfile
  {
    CallSite allocator = snmalloc::pprof_test_allocator_frame();
    CallSite leaf = pprof_site_leaf();
    CallSite middle = pprof_site_middle();
    CallSite root = pprof_site_root();
    CallSite static_site = call_site_in_pprof_static_site();

    std::vector<uintptr_t> through_leaf{
      allocator.return_address, leaf.return_address, middle.return_address, root.return_address};
    std::vector<uintptr_t> through_static{
      static_site.return_address, middle.return_address, root.return_address};

    std::vector<ProfileBucket> buckets{
      {through_leaf.data(), 4, 64, 10.4, 665.6, 5.2, 332.8},
      {through_static.data(), 3, 4096, 3.0, 12288.0, 2.0, 8192.0},
      {through_leaf.data(), 4, 128, 1.5, 192.0, 0.49, 62.7},
    };

    int64_t total_inuse_bytes() const
    {
      int64_t total = 0;
      for (const ProfileBucket& bucket : buckets)
        total += std::llround(bucket.inuse_bytes);
      return total;
    }
  };

  ProfileHeader test_header()
  {
    return {period, time_nanos, duration_nanos, 0};
  }

  std::string quoted(const std::string& path)
  {
    return "'" + path + "'";
  }

  // Encodes, gzips and writes atomically to `path`; fails the test on error.
  void write_profile(
    const std::string& path, const ProfileHeader& header, const std::vector<ProfileBucket>& buckets)
  {
    std::vector<uint8_t> encoded;
    encode_pprof(header, buckets.data(), buckets.size(), encoded);
    REQUIRE(write_gzip_file_atomic(path.c_str(), encoded.data(), encoded.size()) == 0);
  }
}

TEST_CASE("pprof -raw shows every sample, its values and labels", "[pprof]")
{
  TempDir directory;
  std::string path = directory.path() + "/heap.pb.gz";
  TestProfile profile;
  write_profile(path, test_header(), profile.buckets);

  std::string raw = pprof_ok("-raw " + quoted(path));
  INFO(raw);
  CHECK_THAT(raw, Catch::Contains("PeriodType: space bytes"));
  CHECK_THAT(raw, Catch::Contains("Period: " + std::to_string(period)));
  CHECK_THAT(raw, Catch::Contains("Duration: 5s"));
  CHECK_THAT(
    raw,
    Catch::Contains(
      "alloc_objects/count alloc_space/bytes inuse_objects/count inuse_space/bytes[dflt]"));

  for (const ProfileBucket& bucket : profile.buckets)
  {
    // "  10  666  5  333: 1 2 3 4" then "  bytes:[64]" on the next line.
    std::regex sample(
      "\\s" + std::to_string(std::llround(bucket.alloc_objects)) + "\\s+" +
      std::to_string(std::llround(bucket.alloc_bytes)) + "\\s+" +
      std::to_string(std::llround(bucket.inuse_objects)) + "\\s+" +
      std::to_string(std::llround(bucket.inuse_bytes)) + ":[ 0-9]*\n\\s*bytes:\\[" +
      std::to_string(bucket.object_size) + "\\]");
    CHECK(std::regex_search(raw, sample));
  }

  // Location addresses are return address - 1, in the main mapping.
  char leaf_location[64];
  snprintf(
    leaf_location, sizeof(leaf_location), "0x%lx M=1 pprof_site_leaf",
    static_cast<unsigned long>(profile.leaf.return_address - 1));
  CHECK_THAT(raw, Catch::Contains(leaf_location));

  // Mapping 1 is this program, with its build ID.
  ProcessMapping main_mapping = read_process_mappings().at(0);
  CHECK_THAT(raw, Catch::Contains(" " + main_mapping.path + " " + main_mapping.build_id));
  char range[64];
  snprintf(
    range, sizeof(range), "\n1: 0x%lx/0x%lx/0x%lx ",
    static_cast<unsigned long>(main_mapping.start),
    static_cast<unsigned long>(main_mapping.limit),
    static_cast<unsigned long>(main_mapping.file_offset));
  CHECK_THAT(raw, Catch::Contains(range));
}

TEST_CASE("pprof -top totals inuse_space and names the functions", "[pprof]")
{
  TempDir directory;
  std::string path = directory.path() + "/heap.pb.gz";
  TestProfile profile;
  write_profile(path, test_header(), profile.buckets);

  std::string top = pprof_ok("-top -unit=B -sample_index=inuse_space " + quoted(path));
  INFO(top);
  std::string total = std::to_string(profile.total_inuse_bytes()) + "B";
  CHECK_THAT(top, Catch::Contains("of " + total + " total"));
  // Only the two innermost user frames hold bytes themselves ("flat"); the
  // snmalloc:: frame was dropped by drop_frames.
  int64_t through_leaf = std::llround(profile.buckets[0].inuse_bytes) +
    std::llround(profile.buckets[2].inuse_bytes);
  int64_t through_static = std::llround(profile.buckets[1].inuse_bytes);
  CHECK(std::regex_search(
    top, std::regex("\\s" + std::to_string(through_leaf) + "B .*  pprof_site_leaf\\(\\)\n")));
  CHECK(std::regex_search(
    top,
    std::regex(
      "\\s" + std::to_string(through_static) +
      "B .*  \\(anonymous namespace\\)::pprof_static_site\\(\\)\n")));
  CHECK(std::regex_search(top, std::regex(" " + total + " .*  pprof_site_root\\(\\)\n")));
  CHECK_THAT(top, !Catch::Contains("snmalloc::"));
  CHECK_THAT(top, !Catch::Contains("[unit-pprof-roundtrip]"));

  std::string objects = pprof_ok("-top -sample_index=alloc_objects " + quoted(path));
  int64_t total_objects = 0;
  for (const ProfileBucket& bucket : profile.buckets)
    total_objects += std::llround(bucket.alloc_objects);
  CHECK_THAT(objects, Catch::Contains("of " + std::to_string(total_objects) + " total"));
}

TEST_CASE("pprof -traces lists each stack innermost first, allocator cut", "[pprof]")
{
  TempDir directory;
  std::string path = directory.path() + "/heap.pb.gz";
  TestProfile profile;
  write_profile(path, test_header(), profile.buckets);

  std::string traces = pprof_ok("-traces " + quoted(path));
  INFO(traces);
  CHECK(std::regex_search(
    traces,
    std::regex(
      "bytes:\\s+64B\n\\s+333B\\s+pprof_site_leaf\\(\\)\n"
      "\\s+pprof_site_middle\\(\\)\n\\s+pprof_site_root\\(\\)\n")));
  CHECK(std::regex_search(
    traces,
    std::regex(
      "bytes:\\s+4kB\n\\s+8kB\\s+\\(anonymous namespace\\)::pprof_static_site\\(\\)\n"
      "\\s+pprof_site_middle\\(\\)\n\\s+pprof_site_root\\(\\)\n")));
  CHECK_THAT(traces, !Catch::Contains("pprof_test_allocator_frame"));
}

TEST_CASE("pprof -proto rewrites the profile unchanged", "[pprof]")
{
  TempDir directory;
  std::string path = directory.path() + "/heap.pb.gz";
  std::string copy = directory.path() + "/copy.pb.gz";
  TestProfile profile;
  write_profile(path, test_header(), profile.buckets);

  pprof_ok("-proto -output=" + quoted(copy) + " " + quoted(path));
  // pprof has already applied drop_frames to what it writes, so its
  // location table differs; the stacks and values must not.
  for (std::string view : {"-traces", "-top -unit=B", "-top -sample_index=alloc_objects"})
  {
    std::string original = pprof_ok(view + " " + quoted(path));
    std::string rewritten = pprof_ok(view + " " + quoted(copy));
    CHECK_THAT(original, Catch::Contains("pprof_site_leaf"));
    CHECK(rewritten == original);
  }
}

TEST_CASE("with the binary at hand, -symbolize=force gives file:line", "[pprof]")
{
  TempDir directory;
  std::string path = directory.path() + "/heap.pb.gz";
  TestProfile profile;
  write_profile(path, test_header(), profile.buckets);

  // Go's pprof reads the lines from this binary's DWARF through the
  // mapping's file and offsets, so exact lines also show that the mapping
  // is right. (This relies on Go's own DWARF reader, which names only
  // functions outside namespaces and classes: see pprof_encoder.h.)
  std::string traces = pprof_ok("-symbolize=force -lines -traces " + quoted(path));
  INFO(traces);
  for (const CallSite& site : {profile.leaf, profile.middle, profile.root})
    CHECK_THAT(traces, Catch::Contains("stack_sites.cc:" + std::to_string(site.line) + "\n"));
}

TEST_CASE("an empty profile is a valid profile", "[pprof]")
{
  TempDir directory;
  std::string path = directory.path() + "/empty.pb.gz";
  write_profile(path, test_header(), {});

  std::string raw = pprof_ok("-raw " + quoted(path));
  CHECK_THAT(raw, Catch::Contains("PeriodType: space bytes"));
  CHECK_THAT(raw, !Catch::Contains("bytes:["));
  std::string top = pprof_ok("-top -unit=B " + quoted(path));
  CHECK_THAT(top, Catch::Contains("of 0 total"));
}

TEST_CASE("a profile written to a file descriptor reads back", "[pprof]")
{
  TempDir directory;
  std::string path = directory.path() + "/fd.pb.gz";
  TestProfile profile;
  std::vector<uint8_t> encoded;
  encode_pprof(test_header(), profile.buckets.data(), profile.buckets.size(), encoded);

  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0600);
  REQUIRE(fd >= 0);
  CHECK(write_gzip_fd(fd, encoded.data(), encoded.size()) == 0);
  close(fd);

  std::string top = pprof_ok("-top -unit=B " + quoted(path));
  CHECK_THAT(top, Catch::Contains("of " + std::to_string(profile.total_inuse_bytes()) + "B total"));
  CHECK_THAT(top, Catch::Contains("pprof_site_leaf"));
}
