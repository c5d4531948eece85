// Exact mode: at R == 1 every allocation is a sample of weight
// 1 / (1 - e^-size), 1 to within 1e-7, so pprof
// must show, per allocating function, exactly the objects and bytes the
// program allocated there (alloc_*) and still holds (inuse_*), in units of
// malloc_usable_size.  Once with stacks from the unwind tables, once with a
// replaced stack source, so attribution is checked without the unwinder.
#include "support/files.h"
#include "support/pprof_output.h"
#include "support/profiling.h"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <iterator>
#include <malloc.h>

using namespace snmalloc_test;

namespace
{
  constexpr size_t TINY_SIZE = 24;
  constexpr size_t PAGE_SIZE = 4096;
  constexpr size_t LARGE_SIZE = 100 * 1024;
  constexpr size_t CALLOC_COUNT = 10, CALLOC_SIZE = 100;
  constexpr size_t ALIGNMENT = 4096, ALIGNED_SIZE = 5000;
  constexpr size_t REALLOC_STEPS[] = {16, 100, 1000, 5000, 70000, 200000};

  struct Record
  {
    char bytes[700];
  };

  // Where the sites keep what they allocate.  Reserved before profiling
  // starts, so a site makes no allocation but the one it is named for.
  struct Held
  {
    std::vector<void*> tiny, page, large, zeroed, aligned, records, grown;
    // What the blocks realloc grew in place held before: allocated by the
    // step before, not again by that realloc, which allocates only the
    // bytes it adds.
    size_t kept_in_place = 0;

    Held()
    {
      for (auto* v : {&tiny, &page, &large, &zeroed, &aligned, &records, &grown})
        v->reserve(1000);
    }
  };
} // namespace

// The allocation sites.  noinline, and each does something after its last
// allocation, so each is a real frame of its own on the stack.
__attribute__((noinline)) void exact_site_tiny(Held& h, size_t n)
{
  for (size_t i = 0; i < n; i++)
    h.tiny.push_back(std::malloc(TINY_SIZE));
}

__attribute__((noinline)) void exact_site_page(Held& h, size_t n)
{
  for (size_t i = 0; i < n; i++)
    h.page.push_back(std::malloc(PAGE_SIZE));
}

__attribute__((noinline)) void exact_site_large(Held& h, size_t n)
{
  for (size_t i = 0; i < n; i++)
    h.large.push_back(std::malloc(LARGE_SIZE));
}

__attribute__((noinline)) void exact_site_calloc(Held& h, size_t n)
{
  for (size_t i = 0; i < n; i++)
    h.zeroed.push_back(std::calloc(CALLOC_COUNT, CALLOC_SIZE));
}

__attribute__((noinline)) void exact_site_aligned(Held& h, size_t n)
{
  for (size_t i = 0; i < n; i++)
    h.aligned.push_back(aligned_alloc(ALIGNMENT, ALIGNED_SIZE));
}

__attribute__((noinline)) void exact_site_new(Held& h, size_t n)
{
  for (size_t i = 0; i < n; i++)
    h.records.push_back(new Record);
}

// Grows each block through every step; only the last block stays.
__attribute__((noinline)) void exact_site_realloc(Held& h, size_t n)
{
  for (size_t i = 0; i < n; i++)
  {
    void* p = nullptr;
    for (size_t size : REALLOC_STEPS)
    {
      size_t before = p == nullptr ? 0 : malloc_usable_size(p);
      void* q = std::realloc(p, size);
      if (q == p)
        h.kept_in_place += before;
      p = q;
    }
    h.grown.push_back(p);
  }
}

// One allocating function reached from two callers, each calling it at
// the same stack depth: consecutive samples then start their walks at the
// same frame and differ only further out.
__attribute__((noinline)) void* exact_shared_leaf(size_t size)
{
  void* p = std::malloc(size);
  asm volatile("" : : "r"(p) : "memory");
  return p;
}

__attribute__((noinline)) void exact_caller_a(std::vector<void*>& held, size_t size)
{
  held.push_back(exact_shared_leaf(size));
}

__attribute__((noinline)) void exact_caller_b(std::vector<void*>& held, size_t size)
{
  held.push_back(exact_shared_leaf(size));
}

// Frames for the replaced stack source: functions of this binary, each
// with a body of its own so that no two are folded into one address.
__attribute__((noinline)) int synthetic_frame_tiny() { return 1; }
__attribute__((noinline)) int synthetic_frame_page() { return 2; }
__attribute__((noinline)) int synthetic_frame_large() { return 3; }
__attribute__((noinline)) int synthetic_frame_calloc() { return 4; }
__attribute__((noinline)) int synthetic_frame_aligned() { return 5; }
__attribute__((noinline)) int synthetic_frame_new() { return 6; }
__attribute__((noinline)) int synthetic_frame_realloc() { return 7; }
__attribute__((noinline)) int synthetic_frame_elsewhere() { return 8; }
__attribute__((noinline)) int synthetic_frame_root() { return 9; }

namespace
{
  using SiteFunction = void (*)(Held&, size_t);
  using FrameFunction = int (*)();

  struct Site
  {
    const char* name; // as pprof names the real site
    SiteFunction run;
    std::vector<void*> Held::*held;
    size_t request; // bytes asked for by each call (realloc: the last step)
    size_t alignment; // 0: malloc's
    size_t count; // objects (realloc: blocks) allocated
    size_t freed; // of those, freed before the dump
    const char* synthetic_name;
    FrameFunction synthetic_frame;
  };

  const Site SITES[] = {
    {"exact_site_tiny", exact_site_tiny, &Held::tiny, TINY_SIZE, 0, 1000, 500,
     "synthetic_frame_tiny", synthetic_frame_tiny},
    {"exact_site_page", exact_site_page, &Held::page, PAGE_SIZE, 0, 300, 100,
     "synthetic_frame_page", synthetic_frame_page},
    {"exact_site_large", exact_site_large, &Held::large, LARGE_SIZE, 0, 20, 5,
     "synthetic_frame_large", synthetic_frame_large},
    {"exact_site_calloc", exact_site_calloc, &Held::zeroed, CALLOC_COUNT * CALLOC_SIZE, 0,
     200, 150, "synthetic_frame_calloc", synthetic_frame_calloc},
    {"exact_site_aligned", exact_site_aligned, &Held::aligned, ALIGNED_SIZE, ALIGNMENT, 50,
     10, "synthetic_frame_aligned", synthetic_frame_aligned},
    {"exact_site_new", exact_site_new, &Held::records, sizeof(Record), 0, 150, 50,
     "synthetic_frame_new", synthetic_frame_new},
    {"exact_site_realloc", exact_site_realloc, &Held::grown, REALLOC_STEPS[5], 0, 10, 4,
     "synthetic_frame_realloc", synthetic_frame_realloc},
  };

  // What pprof must show for a site.
  SiteValues expected_values(const Site& site)
  {
    size_t usable = usable_size_unsampled(site.request, site.alignment);
    size_t allocations = site.count;
    size_t allocated_bytes = site.count * usable;
    if (site.run == exact_site_realloc)
    {
      // Every step is an allocation of its own: each changes sizeclass,
      // so the block moves (a resize within its class would stay in place
      // and record nothing), or, large, grows in place, when its bytes
      // before are not allocated again (Held::kept_in_place, taken off
      // once the sites have run).
      allocations = site.count * std::size(REALLOC_STEPS);
      allocated_bytes = 0;
      for (size_t size : REALLOC_STEPS)
        allocated_bytes += site.count * usable_size_unsampled(size);
    }
    size_t live = site.count - site.freed;
    return SiteValues{
      int64_t(allocations), int64_t(allocated_bytes), int64_t(live), int64_t(live * usable)};
  }

  // Frees the first `count` objects a site still holds.
  void free_held(Held& h, const Site& site, size_t count)
  {
    std::vector<void*>& v = h.*site.held;
    for (size_t i = 0; i < count; i++)
    {
      if (site.run == exact_site_new)
        delete static_cast<Record*>(v[i]);
      else
        std::free(v[i]);
    }
    v.erase(v.begin(), v.begin() + long(count));
  }

  void free_everything(Held& h)
  {
    for (const Site& site : SITES)
      free_held(h, site, (h.*site.held).size());
  }

  void check_site(const SiteTable& table, const std::string& name, const SiteValues& want)
  {
    SiteValues got = table[name];
    INFO("site " << name);
    CHECK(got.alloc_objects == want.alloc_objects);
    CHECK(got.alloc_space == want.alloc_space);
    CHECK(got.inuse_objects == want.inuse_objects);
    CHECK(got.inuse_space == want.inuse_space);
  }

  // The memory the sites returned is what was asked for.
  void check_objects(Held& h)
  {
    for (void* p : h.zeroed)
    {
      const char* bytes = static_cast<const char*>(p);
      for (size_t i = 0; i < CALLOC_COUNT * CALLOC_SIZE; i++)
        REQUIRE(bytes[i] == 0);
    }
    for (void* p : h.aligned)
      REQUIRE(reinterpret_cast<uintptr_t>(p) % ALIGNMENT == 0);
    for (const Site& site : SITES)
      for (void* p : h.*site.held)
        REQUIRE(p != nullptr);
  }

  // The replaced stack source: two frames, the current site's (or
  // synthetic_frame_elsewhere outside any site) over synthetic_frame_root.
  thread_local FrameFunction current_frame = nullptr;

  size_t synthetic_stack(uintptr_t* out, size_t max)
  {
    FrameFunction frames[] = {
      current_frame != nullptr ? current_frame : synthetic_frame_elsewhere,
      synthetic_frame_root};
    size_t depth = max < 2 ? max : 2;
    for (size_t i = 0; i < depth; i++)
      out[i] = frame_in(frames[i]);
    return depth;
  }
} // namespace

TEST_CASE("exact mode: every site's counts and bytes with stacks from the unwind tables")
{
  std::map<std::string, SiteValues> expected;
  for (const Site& site : SITES)
    expected[site.name] = expected_values(site);

  TempDir dir;
  Held held;
  {
    ProfilingAt exact(1);
    on_fresh_thread([&] {
      for (const Site& site : SITES)
        site.run(held, site.count);
    });
    check_objects(held);
    expected["exact_site_realloc"].alloc_space -= int64_t(held.kept_in_place);
    for (const Site& site : SITES)
      free_held(held, site, site.freed);
    dump_or_fail(dir.file("exact.pb.gz"));

    SiteTable table(dir.file("exact.pb.gz"));
    for (const Site& site : SITES)
      check_site(table, site.name, expected[site.name]);

    // Freeing the rest empties inuse_*; alloc_* stays.
    free_everything(held);
    dump_or_fail(dir.file("freed.pb.gz"));
  }
  SiteTable freed(dir.file("freed.pb.gz"));
  for (const Site& site : SITES)
  {
    SiteValues want = expected[site.name];
    want.inuse_objects = want.inuse_space = 0;
    check_site(freed, site.name, want);
  }
}

TEST_CASE("exact mode: every site's counts and bytes with stacks from a replaced source")
{
  std::map<std::string, SiteValues> expected;
  for (const Site& site : SITES)
    expected[site.synthetic_name] = expected_values(site);

  TempDir dir;
  Held held;
  {
    StackSourceScope source(synthetic_stack);
    ProfilingAt exact(1);
    on_fresh_thread([&] {
      for (const Site& site : SITES)
      {
        current_frame = site.synthetic_frame;
        site.run(held, site.count);
        current_frame = nullptr;
      }
    });
    check_objects(held);
    expected["synthetic_frame_realloc"].alloc_space -= int64_t(held.kept_in_place);
    for (const Site& site : SITES)
      free_held(held, site, site.freed);
    dump_or_fail(dir.file("synthetic.pb.gz"));
  }

  SiteTable table(dir.file("synthetic.pb.gz"));
  for (const Site& site : SITES)
    check_site(table, site.synthetic_name, expected[site.synthetic_name]);
  // The real site functions were not on any stack recorded meanwhile.
  for (const Site& site : SITES)
    CHECK(table[site.name].inuse_objects == 0);

  // Every stack taken from the source is exactly the two frames it gave
  // (the profile also holds cumulative stacks of earlier tests).
  size_t synthetic_stacks = 0;
  for (const Trace& trace : read_traces(dir.file("synthetic.pb.gz"), "alloc_objects"))
  {
    if (trace.functions.empty() || trace.functions[0].rfind("synthetic_frame_", 0) != 0)
      continue;
    INFO("trace innermost " << trace.functions[0]);
    synthetic_stacks++;
    REQUIRE(trace.functions.size() == 2);
    CHECK(trace.functions[1] == "synthetic_frame_root");
  }
  CHECK(synthetic_stacks >= std::size(SITES));
  free_everything(held);
}

TEST_CASE("exact mode: a function reached from two callers in turn is charged to each")
{
  constexpr size_t CALLS = 600;
  TempDir dir;
  std::vector<void*> held;
  held.reserve(CALLS);
  int64_t want_a = 0, want_b = 0;
  {
    ProfilingAt exact(1);
    on_fresh_thread([&] {
      // The callers in a random order (runs of one and of several), the
      // sizes small and large.
      uint32_t x = 12345;
      for (size_t i = 0; i < CALLS; i++)
      {
        x = x * 1103515245 + 12345;
        size_t size = i % 4 == 0 ? 100 * 1024 + (i % 9) * 16384 : 16 + (i % 13) * 40;
        if ((x >> 16) & 1)
        {
          exact_caller_a(held, size);
          want_a++;
        }
        else
        {
          exact_caller_b(held, size);
          want_b++;
        }
      }
    });
    dump_or_fail(dir.file("callers.pb.gz"));
  }
  for (void* p : held)
    std::free(p);

  int64_t got_a = 0, got_b = 0;
  for (const RawSample& sample : read_raw(dir.file("callers.pb.gz")).samples)
  {
    const std::vector<std::string>& f = sample.functions;
    for (size_t i = 0; i + 1 < f.size(); i++)
    {
      if (f[i] != "exact_shared_leaf")
        continue;
      INFO("caller " << f[i + 1]);
      REQUIRE((f[i + 1] == "exact_caller_a" || f[i + 1] == "exact_caller_b"));
      (f[i + 1] == "exact_caller_a" ? got_a : got_b) += sample.values[0];
      break;
    }
  }
  REQUIRE(want_a > 50);
  REQUIRE(want_b > 50);
  CHECK(got_a == want_a);
  CHECK(got_b == want_b);
}
