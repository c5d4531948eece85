// Round trips through pprof's views of one profile: -raw (the profile as
// stored), -top, -traces, -tagfocus, and -proto (pprof's own re-encoding,
// read back again).  Every allocation entry point must be cut at its
// caller.  At R == 1, so every value is exact.  The test cases share sites
// and the alloc_* values are cumulative over the process, so they check
// inuse_* values (each case frees what it allocated).
#include "support/files.h"
#include "support/pprof_output.h"
#include "support/pprof_runner.h"
#include "support/profiling.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <iterator>
#include <malloc.h>
#include <new>

using namespace snmalloc_test;

namespace
{
  constexpr size_t SMALL_SIZE = 100, PAGE_SIZE = 4096;
  constexpr size_t SMALL_COUNT = 300, PAGE_COUNT = 40;

  std::vector<void*> kept;
  size_t caller_calls = 0;

  void free_kept()
  {
    for (void* p : kept)
      std::free(p);
    kept.clear();
  }
} // namespace

__attribute__((noinline)) void roundtrip_site_small(size_t n)
{
  for (size_t i = 0; i < n; i++)
    kept.push_back(std::malloc(SMALL_SIZE));
}

__attribute__((noinline)) void roundtrip_site_page(size_t n)
{
  for (size_t i = 0; i < n; i++)
    kept.push_back(std::malloc(PAGE_SIZE));
}

// A caller of its own, so the traces have a known second frame.
__attribute__((noinline)) void roundtrip_caller()
{
  roundtrip_site_small(SMALL_COUNT);
  caller_calls++;
}

namespace
{
  // One profile with the two sites, written once per test case that reads it.
  struct RoundTripProfile
  {
    TempDir dir;
    std::string path = dir.file("roundtrip.pb.gz");

    RoundTripProfile()
    {
      kept.reserve(SMALL_COUNT + PAGE_COUNT);
      ProfilingAt exact(1);
      on_fresh_thread([] {
        roundtrip_caller();
        roundtrip_site_page(PAGE_COUNT);
      });
      dump_or_fail(path);
    }

    ~RoundTripProfile()
    {
      free_kept();
    }
  };

  // A frame of the allocator itself, which drop_frames should have cut:
  // an entry point (also a compiler's split-off "posix_memalign.cold"), or
  // anything of namespace snmalloc (also "void* snmalloc::f<...>", as
  // function templates are named with their return type).
  bool is_allocator_frame(const std::string& name)
  {
    for (const char* entry :
         {"malloc", "calloc", "realloc", "reallocarray", "free", "posix_memalign",
          "aligned_alloc", "memalign", "valloc", "pvalloc", "operator new"})
    {
      if (name.rfind(entry, 0) == 0)
        return true;
    }
    return name.find("snmalloc::") != std::string::npos;
  }
} // namespace

TEST_CASE("round trip: -raw shows the sample types, period and bytes labels")
{
  size_t small_usable = usable_size_unsampled(SMALL_SIZE);
  size_t page_usable = usable_size_unsampled(PAGE_SIZE);
  RoundTripProfile profile;
  RawProfile raw = read_raw(profile.path);

  CHECK(raw.period_type == "space bytes");
  CHECK(raw.period == 1);
  CHECK(
    raw.sample_types ==
    "alloc_objects/count alloc_space/bytes inuse_objects/count inuse_space/bytes[dflt]");
  REQUIRE_FALSE(raw.samples.empty());

  size_t small_found = 0, page_found = 0;
  for (const RawSample& sample : raw.samples)
  {
    REQUIRE(sample.values.size() == 4);
    REQUIRE(sample.bytes_labels.size() == 1);
    int64_t bytes = sample.bytes_labels[0];
    // At R == 1 each object counts once: space is objects times the label.
    CHECK(sample.values[1] == sample.values[0] * bytes);
    CHECK(sample.values[3] == sample.values[2] * bytes);
    // The innermost frame beyond the allocator's own.
    auto site = std::find_if(
      sample.functions.begin(), sample.functions.end(), [](const std::string& f) {
        return !is_allocator_frame(f);
      });
    REQUIRE(site != sample.functions.end());
    if (*site == "roundtrip_site_small")
    {
      small_found += size_t(sample.values[2]);
      CHECK(bytes == int64_t(small_usable));
      REQUIRE(site + 1 != sample.functions.end());
      CHECK(site[1] == "roundtrip_caller");
    }
    if (*site == "roundtrip_site_page")
    {
      page_found += size_t(sample.values[2]);
      CHECK(bytes == int64_t(page_usable));
    }
  }
  CHECK(small_found == SMALL_COUNT);
  CHECK(page_found == PAGE_COUNT);
}

TEST_CASE("round trip: -top and -traces show the sites and their callers")
{
  size_t small_usable = usable_size_unsampled(SMALL_SIZE);
  RoundTripProfile profile;

  SiteTable top(profile.path);
  CHECK(top["roundtrip_site_small"].inuse_objects == int64_t(SMALL_COUNT));
  CHECK(top["roundtrip_site_small"].inuse_space == int64_t(SMALL_COUNT * small_usable));
  CHECK(top["roundtrip_site_page"].inuse_objects == int64_t(PAGE_COUNT));

  std::vector<Trace> traces = read_traces(profile.path, "inuse_objects");
  size_t small_traces = 0;
  for (const Trace& trace : traces)
  {
    REQUIRE_FALSE(trace.functions.empty());
    INFO("trace of " << trace.functions[0]);
    // drop_frames has cut every stack at the allocator's caller.
    CHECK_FALSE(is_allocator_frame(trace.functions[0]));
    if (trace.functions[0] == "roundtrip_site_small" && trace.value != "0")
    {
      small_traces++;
      CHECK(trace.value == std::to_string(SMALL_COUNT));
      REQUIRE(trace.functions.size() >= 2);
      CHECK(trace.functions[1] == "roundtrip_caller");
    }
  }
  CHECK(small_traces == 1);
}

TEST_CASE("round trip: -tagfocus on the bytes label selects by object size")
{
  size_t page_usable = usable_size_unsampled(PAGE_SIZE);
  RoundTripProfile profile;
  // pprof compares numeric labels with units: "4096B", not "4096".
  SiteTable focused(profile.path, "-tagfocus=bytes=" + std::to_string(page_usable) + "B");
  CHECK(focused["roundtrip_site_page"].inuse_objects == int64_t(PAGE_COUNT));
  CHECK(focused["roundtrip_site_small"].alloc_objects == 0);
}

TEST_CASE("round trip: pprof's -proto output reads back with the same values")
{
  RoundTripProfile profile;
  std::string reencoded = profile.dir.file("reencoded.pb");
  pprof_ok("-proto -output='" + reencoded + "' '" + self_exe() + "' '" + profile.path + "'");
  REQUIRE(file_exists(reencoded));

  SiteTable original(profile.path);
  SiteTable again(reencoded);
  for (const char* site : {"roundtrip_site_small", "roundtrip_site_page", "roundtrip_caller"})
  {
    INFO(site);
    CHECK(again[site].alloc_objects == original[site].alloc_objects);
    CHECK(again[site].alloc_space == original[site].alloc_space);
    CHECK(again[site].inuse_objects == original[site].inuse_objects);
    CHECK(again[site].inuse_space == original[site].inuse_space);
  }
  CHECK(again["roundtrip_site_small"].inuse_objects == int64_t(SMALL_COUNT));
  RawProfile raw = read_raw(reencoded);
  CHECK(raw.period == 1);
  CHECK_FALSE(raw.samples.empty());
}

TEST_CASE("set_max_depth bounds the recorded stacks")
{
  REQUIRE(snmalloc::profile::set_max_depth(2) == 0);
  RoundTripProfile profile;
  REQUIRE(snmalloc::profile::set_max_depth(snmalloc::profile::DEFAULT_DEPTH) == 0);
  size_t small_samples = 0;
  for (const RawSample& sample : read_raw(profile.path).samples)
  {
    if (sample.values[2] == 0)
      continue; // a stack of an earlier test case, all freed
    CHECK(sample.functions.size() <= 2);
    if (!sample.functions.empty() && sample.functions[0] == "roundtrip_site_small")
    {
      small_samples++;
      REQUIRE(sample.functions.size() == 2);
      CHECK(sample.functions[1] == "roundtrip_caller");
    }
  }
  CHECK(small_samples == 1);
}

// One site per allocation entry point.
__attribute__((noinline)) void entry_malloc() { kept.push_back(std::malloc(200)); }
__attribute__((noinline)) void entry_calloc() { kept.push_back(std::calloc(4, 50)); }
__attribute__((noinline)) void entry_realloc()
{
  kept.push_back(std::realloc(std::malloc(16), 300));
}
__attribute__((noinline)) void entry_reallocarray()
{
  kept.push_back(reallocarray(nullptr, 3, 100));
}
__attribute__((noinline)) void entry_posix_memalign()
{
  void* p = nullptr;
  if (posix_memalign(&p, 64, 200) == 0)
    kept.push_back(p);
}
__attribute__((noinline)) void entry_aligned_alloc() { kept.push_back(aligned_alloc(64, 256)); }
__attribute__((noinline)) void entry_memalign() { kept.push_back(memalign(128, 200)); }
__attribute__((noinline)) void entry_valloc() { kept.push_back(valloc(100)); }
__attribute__((noinline)) void entry_pvalloc() { kept.push_back(pvalloc(100)); }
__attribute__((noinline)) void entry_new() { kept.push_back(::operator new(200)); }
__attribute__((noinline)) void entry_new_array() { kept.push_back(::operator new[](200)); }
__attribute__((noinline)) void entry_new_nothrow()
{
  kept.push_back(::operator new(200, std::nothrow));
}
__attribute__((noinline)) void entry_new_aligned()
{
  kept.push_back(::operator new(200, std::align_val_t(256)));
}
__attribute__((noinline)) void entry_new_large() { kept.push_back(::operator new(300000)); }

TEST_CASE("every allocation entry point is attributed to its caller")
{
  using Entry = void (*)();
  const std::pair<const char*, Entry> entries[] = {
    {"entry_malloc", entry_malloc},
    {"entry_calloc", entry_calloc},
    {"entry_realloc", entry_realloc},
    {"entry_reallocarray", entry_reallocarray},
    {"entry_posix_memalign", entry_posix_memalign},
    {"entry_aligned_alloc", entry_aligned_alloc},
    {"entry_memalign", entry_memalign},
    {"entry_valloc", entry_valloc},
    {"entry_pvalloc", entry_pvalloc},
    {"entry_new", entry_new},
    {"entry_new_array", entry_new_array},
    {"entry_new_nothrow", entry_new_nothrow},
    {"entry_new_aligned", entry_new_aligned},
    {"entry_new_large", entry_new_large}};
  constexpr size_t CALLS = 20;
  kept.reserve(std::size(entries) * CALLS);
  TempDir dir;
  {
    ProfilingAt exact(1);
    on_fresh_thread([&] {
      for (const auto& [name, entry] : entries)
        for (size_t i = 0; i < CALLS; i++)
          entry();
    });
    dump_or_fail(dir.file("entries.pb.gz"));
  }
  REQUIRE(kept.size() == std::size(entries) * CALLS);
  SiteTable table(dir.file("entries.pb.gz"));
  for (const auto& [name, entry] : entries)
  {
    INFO(name);
    // realloc of a malloc'ed block: the malloc and the realloc's new block.
    size_t allocations = entry == entry_realloc ? 2 * CALLS : CALLS;
    CHECK(table[name].alloc_objects == int64_t(allocations));
  }
  // Nothing is left on an allocator frame ("posix_memalign.cold", say).
  for (const Trace& trace : read_traces(dir.file("entries.pb.gz"), "alloc_objects"))
  {
    REQUIRE_FALSE(trace.functions.empty());
    INFO("innermost frame " << trace.functions[0] << ", caller "
                            << (trace.functions.size() > 1 ? trace.functions[1] : ""));
    CHECK_FALSE(is_allocator_frame(trace.functions[0]));
  }
  free_kept();
}
