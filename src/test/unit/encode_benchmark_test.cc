// A dump of the size the profiler is built for: 100,000 live samples over
// 5,000 distinct stacks of 64 frames, 20,000 distinct addresses in real
// functions of this program and libstdc++. Prints how long encoding (with
// symbolization) and gzip + write take (the goal: under 250 ms for the
// whole dump); asserts only that the result is complete.

#include "support/files.h"
#include "support/proto_reader.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <algorithm>
#include <cmath>
#include <ctime>
#include <map>
#include <snmalloc/profile/pprof/dump_file.h>
#include <snmalloc/profile/pprof/pprof_encoder.h>

using namespace snmalloc::profile;
using namespace snmalloc_test;

namespace
{
  constexpr size_t sample_count = 100000;
  constexpr size_t stack_count = 5000;
  constexpr uint32_t stack_depth = 64;
  constexpr size_t address_count = 20000;
  constexpr uint64_t period = 512 * 1024;

  struct Xorshift
  {
    uint64_t state = 0x2545f4914f6cdd1d;
    uint64_t next()
    {
      state ^= state << 13;
      state ^= state >> 7;
      state ^= state << 17;
      return state;
    }
  };

  // `count` addresses spread evenly over a mapping's code, each + 1 as if
  // it were a return address.
  void spread_over(const ProcessMapping& mapping, size_t count, std::vector<uintptr_t>& out)
  {
    uint64_t step = (mapping.limit - mapping.start) / count;
    REQUIRE(step > 0);
    for (size_t i = 0; i < count; i++)
      out.push_back(mapping.start + i * step + 1);
  }

  struct Duration
  {
    double wall_ms = 1e300;
    double cpu_ms = 1e300;

    void keep_best(const Duration& other)
    {
      wall_ms = std::min(wall_ms, other.wall_ms);
      cpu_ms = std::min(cpu_ms, other.cpu_ms);
    }
  };

  class Stopwatch
  {
    std::chrono::steady_clock::time_point wall = std::chrono::steady_clock::now();
    double cpu = cpu_ms();

    static double cpu_ms()
    {
      timespec now;
      clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
      return static_cast<double>(now.tv_sec) * 1e3 + static_cast<double>(now.tv_nsec) / 1e6;
    }

  public:
    // The time since the last lap (or since construction).
    Duration lap()
    {
      auto wall_now = std::chrono::steady_clock::now();
      double cpu_now = cpu_ms();
      Duration lap{
        std::chrono::duration<double, std::milli>(wall_now - wall).count(), cpu_now - cpu};
      wall = wall_now;
      cpu = cpu_now;
      return lap;
    }
  };
}

TEST_CASE("encode and write a 100,000-sample dump", "[pprof][benchmark]")
{
  std::vector<ProcessMapping> mappings = read_process_mappings();
  const ProcessMapping* libstdcxx = nullptr;
  for (const ProcessMapping& mapping : mappings)
    if (mapping.path.find("libstdc++") != std::string::npos)
      libstdcxx = &mapping;
  REQUIRE(libstdcxx != nullptr);
  std::vector<uintptr_t> addresses;
  spread_over(mappings.at(0), address_count / 2, addresses);
  spread_over(*libstdcxx, address_count / 2, addresses);

  // Every address appears in some stack: fill the stacks' frames with the
  // addresses in turn, then shuffle.
  Xorshift random;
  std::vector<uintptr_t> frames(stack_count * stack_depth);
  for (size_t i = 0; i < frames.size(); i++)
    frames[i] = addresses[i % addresses.size()];
  for (size_t i = frames.size() - 1; i > 0; i--)
    std::swap(frames[i], frames[random.next() % (i + 1)]);

  // Samples of a few sizes, gathered into one bucket per (stack, size),
  // weighted as the sampler's unbiased estimates.
  const uint64_t sizes[] = {16, 48, 128, 512, 2048, 8192, 65536, 1 << 20};
  std::map<std::pair<size_t, uint64_t>, ProfileBucket> by_stack_and_size;
  for (size_t i = 0; i < sample_count; i++)
  {
    size_t stack = random.next() % stack_count;
    uint64_t size = sizes[random.next() % 8];
    double objects = 1 / (1 - std::exp(-static_cast<double>(size) / period));
    auto [entry, inserted] = by_stack_and_size.try_emplace(
      {stack, size},
      ProfileBucket{&frames[stack * stack_depth], stack_depth, size, 0, 0, 0, 0});
    entry->second.alloc_objects += objects;
    entry->second.alloc_bytes += objects * static_cast<double>(size);
    entry->second.inuse_objects += objects;
    entry->second.inuse_bytes += objects * static_cast<double>(size);
  }
  std::vector<ProfileBucket> buckets;
  int64_t total_inuse_bytes = 0;
  for (const auto& [key, bucket] : by_stack_and_size)
  {
    buckets.push_back(bucket);
    total_inuse_bytes += std::llround(bucket.inuse_bytes);
  }

  TempDir directory;
  std::string path = directory.path() + "/large.pb.gz";

  // The best of three dumps, in wall-clock and CPU time (this thread's),
  // since other work on the machine inflates wall-clock time.
  Duration encode_time, write_time, symbolize_time;
  std::vector<uint8_t> encoded;
  for (int run = 0; run < 3; run++)
  {
    Stopwatch stopwatch;
    encoded.clear();
    encode_pprof({period, 0, 0, 0}, buckets.data(), buckets.size(), encoded);
    encode_time.keep_best(stopwatch.lap());
    REQUIRE(write_gzip_file_atomic(path.c_str(), encoded.data(), encoded.size()) == 0);
    write_time.keep_best(stopwatch.lap());
    Symbolizer symbolizer(mappings);
    for (uintptr_t address : addresses)
      symbolizer.function_name(address - 1);
    symbolize_time.keep_best(stopwatch.lap());
  }

  printf(
    "dump of %zu samples, %zu buckets, %zu stacks x %u frames, %zu addresses,\n"
    "best of 3, wall-clock / CPU ms:\n"
    "  encode (mappings, symbolization, protobuf) %6.1f / %6.1f  (%zu bytes)\n"
    "  gzip + write + fsync + rename              %6.1f / %6.1f  (%zu bytes)\n"
    "  total                                      %6.1f / %6.1f\n"
    "  symbolization alone, same addresses       %6.1f / %6.1f\n",
    sample_count, buckets.size(), stack_count, stack_depth, addresses.size(),
    encode_time.wall_ms, encode_time.cpu_ms, encoded.size(), write_time.wall_ms,
    write_time.cpu_ms, read_file(path).size(),
    encode_time.wall_ms + write_time.wall_ms, encode_time.cpu_ms + write_time.cpu_ms,
    symbolize_time.wall_ms, symbolize_time.cpu_ms);

  // Decoded (by the tests' reader: pprof takes seconds on a profile this
  // size), the dump holds every bucket and location and the right total.
  Message profile = decode(std::string(encoded.begin(), encoded.end()));
  CHECK(all(profile, 4).size() == addresses.size());
  std::vector<Field> samples = all(profile, 2);
  REQUIRE(samples.size() == buckets.size());
  int64_t decoded_inuse_bytes = 0;
  for (const Field& sample : samples)
  {
    Message fields = decode(sample.bytes);
    CHECK(packed(fields, 1).size() == stack_depth);
    decoded_inuse_bytes += static_cast<int64_t>(packed(fields, 2).at(3));
  }
  CHECK(decoded_inuse_bytes == total_inuse_bytes);
  CHECK(read_file(path).size() < encoded.size());
}
