// Sampled objects live in the profile pool, not in the slabs of their
// sizeclass.  To the program they must be indistinguishable from the
// objects they stand in for: same usable size, requested alignment, calloc
// zeroing, realloc contents, and free from any thread.  All at R == 1, so
// every object here is a sampled one; each test also reads the profile to
// confirm that its allocations really were sampled.  For that the stack
// source is replaced by one that names the allocating site directly: these
// tests are about the objects, not about stack capture and attribution
// (exact_test.cc and roundtrip_test.cc check those).
#include "support/files.h"
#include "support/pprof_output.h"
#include "support/profiling.h"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <condition_variable>
#include <cstring>
#include <iterator>
#include <malloc.h>
#include <mutex>
#include <new>

using namespace snmalloc_test;

namespace
{
  constexpr size_t MAX_TESTED_SIZE = 70000; // past the largest small class

  unsigned char fill_byte(size_t seed)
  {
    return static_cast<unsigned char>(seed * 131 + 7);
  }

  void fill(void* p, size_t n, size_t seed)
  {
    std::memset(p, fill_byte(seed), n);
  }

  // Compares against a block of the expected byte: memcmp is many times
  // faster than a byte loop, and gigabytes are checked here.
  bool holds_byte(const void* p, size_t n, unsigned char b)
  {
    static thread_local unsigned char expected[64 * 1024];
    std::memset(expected, b, sizeof(expected));
    const auto* bytes = static_cast<const unsigned char*>(p);
    for (size_t done = 0; done < n; done += sizeof(expected))
    {
      size_t piece = n - done < sizeof(expected) ? n - done : sizeof(expected);
      if (std::memcmp(bytes + done, expected, piece) != 0)
        return false;
    }
    return true;
  }

  bool filled(const void* p, size_t n, size_t seed)
  {
    return holds_byte(p, n, fill_byte(seed));
  }

  bool all_zero(const void* p, size_t n)
  {
    return holds_byte(p, n, 0);
  }

  bool aligned_to(const void* p, size_t alignment)
  {
    return reinterpret_cast<uintptr_t>(p) % alignment == 0;
  }

  std::vector<void*> kept;

  // The frame of the site allocating on this thread, if any: the one frame
  // the replaced stack source records.
  thread_local uintptr_t current_site = 0;

  __attribute__((noinline)) int allocation_elsewhere()
  {
    return 1;
  }

  size_t site_stack(uintptr_t* out, size_t max)
  {
    if (max == 0)
      return 0;
    out[0] = current_site != 0 ? current_site : frame_in(allocation_elsewhere);
    return 1;
  }

  // Marks a site's allocations for site_stack.
  class AtSite
  {
  public:
    template<typename F>
    explicit AtSite(F* site)
    {
      current_site = frame_in(site);
    }

    ~AtSite()
    {
      current_site = 0;
    }
  };

  // Every allocation sampled, on stacks from site_stack.
  class SampledAtSites
  {
    StackSourceScope source_{site_stack};
    ProfilingAt exact_{1};
  };
} // namespace

__attribute__((noinline)) void* sampled_site_malloc(size_t n)
{
  AtSite here(sampled_site_malloc);
  void* p = std::malloc(n);
  kept.push_back(p);
  return p;
}

__attribute__((noinline)) void* sampled_site_class(size_t n)
{
  AtSite here(sampled_site_class);
  void* p = std::malloc(n);
  kept.push_back(p);
  return p;
}

__attribute__((noinline)) void* sampled_site_aligned_alloc(size_t alignment, size_t n)
{
  AtSite here(sampled_site_aligned_alloc);
  void* p = aligned_alloc(alignment, n);
  kept.push_back(p);
  return p;
}

__attribute__((noinline)) void* sampled_site_posix_memalign(size_t alignment, size_t n)
{
  AtSite here(sampled_site_posix_memalign);
  void* p = nullptr;
  if (posix_memalign(&p, alignment, n) != 0)
    p = nullptr;
  kept.push_back(p);
  return p;
}

__attribute__((noinline)) void* sampled_site_new_aligned(size_t alignment, size_t n)
{
  AtSite here(sampled_site_new_aligned);
  void* p = ::operator new(n, std::align_val_t(alignment));
  kept.push_back(p);
  return p;
}

__attribute__((noinline)) void* sampled_site_calloc(size_t n)
{
  AtSite here(sampled_site_calloc);
  void* p = std::calloc(1, n);
  kept.push_back(p);
  return p;
}

__attribute__((noinline)) void* sampled_site_realloc(void* p, size_t n)
{
  AtSite here(sampled_site_realloc);
  void* q = std::realloc(p, n);
  kept.push_back(q);
  return q;
}

__attribute__((noinline)) void* sampled_site_handed_over(size_t n)
{
  AtSite here(sampled_site_handed_over);
  void* p = std::malloc(n);
  kept.push_back(p);
  return p;
}

namespace
{
  // Reads the profile and returns what pprof shows for `site`.
  SiteValues profile_of(const TempDir& dir, const std::string& site)
  {
    std::string path = dir.file(site + ".pb.gz");
    dump_or_fail(path);
    return SiteTable(path)[site];
  }

  // Frees what the sites kept, on the calling thread.
  void free_kept()
  {
    for (void* p : kept)
      std::free(p);
    kept.clear();
  }
} // namespace

TEST_CASE("sampled objects: usable size equals the unsampled one for sizes 1 to 70000")
{
  std::vector<size_t> unsampled(MAX_TESTED_SIZE + 1);
  for (size_t n = 1; n <= MAX_TESTED_SIZE; n++)
    unsampled[n] = usable_size_unsampled(n);
  kept.reserve(MAX_TESTED_SIZE);
  TempDir dir;
  SampledAtSites exact;
  std::vector<size_t> sampled(MAX_TESTED_SIZE + 1);
  size_t overwritten = 0; // objects whose neighbour's writes reached them
  on_fresh_thread([&] {
    // The last WINDOW objects stay live while later ones are written over
    // their whole usable size: a block too small for what it reports
    // would overwrite a neighbour (or its record, and crash free).
    constexpr size_t WINDOW = 256;
    for (size_t n = 1; n <= MAX_TESTED_SIZE; n++)
    {
      void* p = sampled_site_malloc(n);
      sampled[n] = malloc_usable_size(p);
      fill(p, sampled[n], n);
      if (n > WINDOW)
      {
        size_t old = n - WINDOW;
        if (!filled(kept[old - 1], sampled[old], old))
          overwritten++;
        std::free(kept[old - 1]);
        kept[old - 1] = nullptr;
      }
    }
  });
  SiteValues profile = profile_of(dir, "sampled_site_malloc");
  free_kept();

  CHECK(overwritten == 0);
  size_t mismatches = 0;
  for (size_t n = 1; n <= MAX_TESTED_SIZE; n++)
  {
    if (sampled[n] != unsampled[n] && mismatches++ < 10)
      FAIL_CHECK("malloc(" << n << "): usable " << sampled[n] << " sampled, "
                           << unsampled[n] << " unsampled");
  }
  CHECK(mismatches == 0);
  // They were sampled: every one is in the profile.
  CHECK(profile.alloc_objects == int64_t(MAX_TESTED_SIZE));
}

TEST_CASE("sampled objects honour every power-of-two alignment from 16 to 1 MiB")
{
  struct Request
  {
    size_t alignment, size, unsampled_usable;
  };
  std::vector<Request> requests;
  for (size_t alignment = 16; alignment <= (size_t(1) << 20); alignment *= 2)
  {
    for (size_t size : {size_t(1), alignment / 2 + 1, alignment, alignment + 1, 3 * alignment})
      requests.push_back({alignment, size, usable_size_unsampled(size, alignment)});
  }

  using AlignedSite = void* (*)(size_t, size_t);
  const std::pair<const char*, AlignedSite> sites[] = {
    {"sampled_site_aligned_alloc", sampled_site_aligned_alloc},
    {"sampled_site_posix_memalign", sampled_site_posix_memalign},
    {"sampled_site_new_aligned", sampled_site_new_aligned}};

  kept.reserve(std::size(sites) * requests.size());
  TempDir dir;
  SampledAtSites exact;
  for (const auto& [name, site] : sites)
  {
    std::vector<void*> objects;
    on_fresh_thread([&, site = site] {
      for (const Request& r : requests)
        objects.push_back(site(r.alignment, r.size));
    });
    for (size_t i = 0; i < requests.size(); i++)
    {
      const Request& r = requests[i];
      INFO(name << "(alignment " << r.alignment << ", size " << r.size << ")");
      REQUIRE(objects[i] != nullptr);
      CHECK(aligned_to(objects[i], r.alignment));
      CHECK(malloc_usable_size(objects[i]) == r.unsampled_usable);
      fill(objects[i], malloc_usable_size(objects[i]), i);
    }
    for (size_t i = 0; i < requests.size(); i++)
      CHECK(filled(objects[i], malloc_usable_size(objects[i]), i));
    INFO("profile of " << name);
    CHECK(profile_of(dir, name).inuse_objects == int64_t(requests.size()));
  }
  free_kept();
}

TEST_CASE("sampled objects: a pointer anywhere into one has the object's usable size")
{
  // As for an unsampled object (the whole of a small one, the first chunk
  // of a large one): the record is found from the pool block, not from
  // the bytes below the pointer, which for an interior pointer are the
  // object's own data, whatever the program wrote there, not a record.
  // Alignments of 64 and more put the record further into the block than
  // its start.
  struct Request
  {
    size_t alignment, size;
  };
  std::vector<Request> requests;
  for (size_t alignment : {size_t(16), size_t(64), size_t(1024), size_t(8192)})
  {
    for (size_t size : {1, 100, 1000, 5000, 20000, 70000, 300000})
      requests.push_back({alignment, size});
  }
  kept.reserve(requests.size());
  TempDir dir;
  SampledAtSites exact;
  std::vector<void*> objects;
  on_fresh_thread([&] {
    for (const Request& r : requests)
      objects.push_back(sampled_site_aligned_alloc(r.alignment, r.size));
  });
  for (size_t i = 0; i < requests.size(); i++)
  {
    INFO("aligned_alloc(" << requests[i].alignment << ", " << requests[i].size << ")");
    REQUIRE(objects[i] != nullptr);
    auto* p = static_cast<char*>(objects[i]);
    size_t usable = malloc_usable_size(p);
    REQUIRE(usable >= requests[i].size);
    size_t reach = usable < snmalloc::config::CHUNK_SIZE ? usable : snmalloc::config::CHUNK_SIZE;
    for (size_t offset : {size_t(1), reach / 2, reach - 1})
    {
      INFO("offset " << offset);
      CHECK(malloc_usable_size(p + offset) == usable);
    }
  }
  CHECK(profile_of(dir, "sampled_site_aligned_alloc").inuse_objects == int64_t(requests.size()));
  free_kept();
}

TEST_CASE("sampled objects keep the natural alignment of their size")
{
  // DESIGN.md: a sampled object's header is "placed so the object keeps
  // the alignment its sizeclass guarantees"; objects of a sizeclass are
  // naturally aligned (a 4 KiB object is 4 KiB aligned); large ones are
  // runs of 16 KiB chunks at any chunk, so sizes whose natural alignment
  // is a chunk.  Checked for every small class and some large sizes with
  // plain malloc, which asks for no alignment.
  std::vector<size_t> sizes;
  for (size_t n = 16; n <= snmalloc::config::MAX_SMALL_SIZE; n += 16)
    if (usable_size_unsampled(n) == n)
      sizes.push_back(n);
  REQUIRE(sizes.size() > 40);
  for (size_t large : {100000, 300000, (1 << 20) + 1})
    sizes.push_back(usable_size_unsampled(large));
  // An object of the largest class has no room for its record in a class
  // block and is a run of chunks, as large ones are, which are packed at
  // any chunk: after runs of odd chunk counts the next free chunk is at
  // every offset, and it must still get its class's alignment.
  constexpr size_t chunk = size_t(1) << snmalloc::config::CHUNK_BITS;
  for (size_t round = 0; round < 4; round++)
    for (size_t odd = 1; odd <= 7; odd += 2)
    {
      sizes.push_back(snmalloc::config::MAX_SMALL_SIZE + odd * chunk);
      sizes.push_back(snmalloc::config::MAX_SMALL_SIZE);
    }

  kept.reserve(sizes.size());
  TempDir dir;
  SampledAtSites exact;
  on_fresh_thread([&] {
    for (size_t size : sizes)
      sampled_site_class(size);
  });
  for (size_t i = 0; i < sizes.size(); i++)
  {
    size_t natural = sizes[i] & (~sizes[i] + 1); // largest power of two dividing it
    INFO("malloc(" << sizes[i] << ") at " << kept[i] << ", natural alignment " << natural);
    CHECK(aligned_to(kept[i], natural));
  }
  CHECK(profile_of(dir, "sampled_site_class").inuse_objects == int64_t(sizes.size()));
  free_kept();
}

TEST_CASE("calloc of a sampled object is zeroed also when it reuses memory")
{
  const size_t sizes[] = {24, 1000, 4096, 60000, 100000, 300000};
  constexpr size_t ROUNDS = 20;
  kept.reserve(std::size(sizes) * ROUNDS * 2);
  TempDir dir;
  SampledAtSites exact;
  size_t not_zeroed = 0;
  on_fresh_thread([&] {
    for (size_t round = 0; round < ROUNDS; round++)
    {
      // Dirty blocks of every size, free them, and calloc the same sizes,
      // which the pool serves from the blocks just freed.
      std::vector<void*> dirty;
      for (size_t size : sizes)
      {
        void* p = std::malloc(size);
        fill(p, malloc_usable_size(p), round + 1);
        dirty.push_back(p);
      }
      for (void* p : dirty)
        std::free(p);
      for (size_t size : sizes)
        if (!all_zero(sampled_site_calloc(size), size))
          not_zeroed++;
      for (void*& p : kept)
      {
        fill(p, malloc_usable_size(p), round + 2);
        std::free(p);
      }
      kept.clear();
    }
    // One more round left live for the profile.
    for (size_t size : sizes)
      if (!all_zero(sampled_site_calloc(size), size))
        not_zeroed++;
  });
  CHECK(not_zeroed == 0);
  SiteValues profile = profile_of(dir, "sampled_site_calloc");
  CHECK(profile.alloc_objects == int64_t(std::size(sizes) * (ROUNDS + 1)));
  CHECK(profile.inuse_objects == int64_t(std::size(sizes)));
  free_kept();
}

TEST_CASE("realloc of a sampled object keeps its contents, staying within its class")
{
  // Shrink, same size, grow, small <-> large, large -> large.
  const std::pair<size_t, size_t> resizes[] = {
    {100, 50}, {100, 100}, {100, 101}, {24, 4000}, {4000, 70000},
    {70000, 1000}, {100000, 300000}, {300000, 100000}, {65536, 65536}};
  std::vector<size_t> unsampled, unsampled_from;
  for (const auto& [from, to] : resizes)
  {
    unsampled.push_back(usable_size_unsampled(to));
    unsampled_from.push_back(usable_size_unsampled(from));
  }
  kept.reserve(std::size(resizes));
  TempDir dir;
  SampledAtSites exact;
  std::vector<void*> before, after;
  std::vector<bool> kept_contents;
  on_fresh_thread([&] {
    for (size_t i = 0; i < std::size(resizes); i++)
    {
      auto [from, to] = resizes[i];
      void* p = std::malloc(from);
      fill(p, from, i);
      before.push_back(p);
      void* q = sampled_site_realloc(p, to);
      after.push_back(q);
      kept_contents.push_back(filled(q, from < to ? from : to, i));
    }
  });
  int64_t allocations = 0;
  for (size_t i = 0; i < std::size(resizes); i++)
  {
    auto [from, to] = resizes[i];
    INFO("realloc from " << from << " to " << to);
    REQUIRE(after[i] != nullptr);
    // Within the same class a resize is no allocation: the object stays.
    // Into another it moves, except that a large object may grow in place
    // where the chunks after it are free (the next test): an allocation
    // either way.
    bool same_class = unsampled_from[i] == unsampled[i];
    if (same_class)
      CHECK(after[i] == before[i]);
    else if (from <= snmalloc::config::MAX_SMALL_SIZE || to < from)
      CHECK(after[i] != before[i]);
    allocations += same_class ? 0 : 1;
    CHECK(kept_contents[i]);
    CHECK(malloc_usable_size(after[i]) == unsampled[i]);
  }
  // Only the resizes into another class are allocations of the realloc site.
  SiteValues profile = profile_of(dir, "sampled_site_realloc");
  CHECK(profile.inuse_objects == allocations);
  free_kept();
}

TEST_CASE("a sampled large object grown in place is recorded again at its new size")
{
  constexpr size_t FROM = 100000, STEP = 64 * 1024, MAX_TRIES = 8;
  std::vector<size_t> usable_after; // of the size after each try
  for (size_t i = 1; i <= MAX_TRIES; i++)
    usable_after.push_back(usable_size_unsampled(FROM + i * STEP));
  kept.reserve(1); // the sites' own bookkeeping allocates nothing sampled
  TempDir dir;
  SampledAtSites exact;
  void* grown = nullptr;
  size_t tries = 0, size = FROM;
  // Allocations counted here, apart from earlier tests' in this process.
  dump_or_fail(dir.file("before.pb.gz"));
  SiteTable before(dir.file("before.pb.gz"));
  on_fresh_thread([&] {
    // Grown until it stays: an object that cannot grow in place moves to
    // the end of what the backend has handed out, where the next step can.
    void* p = sampled_site_malloc(FROM);
    fill(p, FROM, 5);
    kept.clear();
    while (grown == nullptr && tries < MAX_TRIES)
    {
      tries++;
      size += STEP;
      void* q = sampled_site_realloc(p, size);
      kept.clear();
      REQUIRE(q != nullptr);
      REQUIRE(filled(q, FROM, 5));
      if (q == p)
        grown = q;
      p = q;
    }
  });
  INFO("tries: " << tries);
  REQUIRE(grown != nullptr);
  size_t usable = usable_after[tries - 1];
  CHECK(malloc_usable_size(grown) == usable);
  // The old record went with the old size: the malloc site holds nothing;
  // the realloc site holds the grown object, once, at its new size.
  dump_or_fail(dir.file("grown.pb.gz"));
  SiteTable table(dir.file("grown.pb.gz"));
  auto allocated_at = [&](const std::string& site) {
    return table[site].alloc_objects - before[site].alloc_objects;
  };
  CHECK(allocated_at("sampled_site_malloc") == 1);
  CHECK(table["sampled_site_malloc"].inuse_objects == 0);
  CHECK(allocated_at("sampled_site_realloc") == int64_t(tries));
  CHECK(table["sampled_site_realloc"].inuse_objects == 1);
  CHECK(table["sampled_site_realloc"].inuse_space == int64_t(usable));
  std::free(grown);
}

// A buffer grown by realloc, in steps of varied length, in place where it
// can be and moved where not: every step that allocates is counted at the
// realloc site, a move as its new object's size, a growth in place as the
// bytes it added (not the object's new size again), while the live heap
// holds the buffer once at its final size.
TEST_CASE("a buffer grown by realloc counts what each step allocated")
{
  constexpr size_t FROM = 70000, STEPS = 40;
  const size_t step_bytes[] = {4096, 65536, 12288, 200000, 1 << 20, 30000};
  kept.reserve(1);
  TempDir dir;
  SampledAtSites exact;
  dump_or_fail(dir.file("before.pb.gz"));
  SiteTable before(dir.file("before.pb.gz"));
  int64_t allocated = 0, allocations = 0; // a step within the object's room is none
  size_t in_place = 0, usable = 0;
  void* buffer = nullptr;
  on_fresh_thread([&] {
    void* p = sampled_site_malloc(FROM);
    size_t size = FROM;
    usable = malloc_usable_size(p);
    kept.clear();
    for (size_t i = 0; i < STEPS; i++)
    {
      size += step_bytes[i % (sizeof(step_bytes) / sizeof(step_bytes[0]))];
      void* q = sampled_site_realloc(p, size);
      kept.clear();
      REQUIRE(q != nullptr);
      size_t now = malloc_usable_size(q);
      if (q != p)
      {
        allocations++;
        allocated += int64_t(now);
      }
      else if (now != usable)
      {
        in_place++;
        allocations++;
        allocated += int64_t(now - usable);
      }
      p = q;
      usable = now;
    }
    buffer = p;
  });
  INFO("steps in place: " << in_place);
  REQUIRE(in_place > 0);
  dump_or_fail(dir.file("grown.pb.gz"));
  SiteTable table(dir.file("grown.pb.gz"));
  SiteValues site = table["sampled_site_realloc"];
  CHECK(site.alloc_space - before["sampled_site_realloc"].alloc_space == allocated);
  CHECK(site.alloc_objects - before["sampled_site_realloc"].alloc_objects == allocations);
  CHECK(site.inuse_objects == 1);
  CHECK(site.inuse_space == int64_t(usable));
  std::free(buffer);
}

// In count mode a growth is no allocation: a sampled object realloc grew
// in place keeps its sample, now of its new size, and is shown under the
// `bytes` label of that size, not of the size it had before.
TEST_CASE("a sampled object grown in place without a new sample is labelled with its new size")
{
  constexpr size_t FROM = 100000, STEP = 64 * 1024, MAX_TRIES = 8;
  kept.reserve(1);
  TempDir dir;
  StackSourceScope source(site_stack);
  ProfilingAt counted(snmalloc::profile::SampleMode::Count, 1);
  void* grown = nullptr;
  size_t tries = 0, size = FROM, before_growth = 0;
  on_fresh_thread([&] {
    void* p = sampled_site_malloc(FROM);
    kept.clear();
    while (grown == nullptr && tries < MAX_TRIES)
    {
      tries++;
      size += STEP;
      size_t old = malloc_usable_size(p);
      void* q = sampled_site_realloc(p, size);
      kept.clear();
      REQUIRE(q != nullptr);
      if (q == p)
      {
        grown = q;
        before_growth = old;
      }
      p = q;
    }
  });
  INFO("tries: " << tries);
  REQUIRE(grown != nullptr);
  size_t usable = malloc_usable_size(grown);
  REQUIRE(usable > before_growth);
  dump_or_fail(dir.file("grown.pb.gz"));
  // inuse_objects is the third value (empty_test checks the order).
  std::vector<int64_t> live_sizes;
  for (const RawSample& s : read_raw(dir.file("grown.pb.gz")).samples)
  {
    bool at_sites = false;
    for (const std::string& f : s.functions)
      at_sites |= f == "sampled_site_malloc" || f == "sampled_site_realloc";
    if (at_sites && s.values.at(2) != 0)
    {
      REQUIRE(s.bytes_labels.size() == 1);
      live_sizes.push_back(s.bytes_labels[0]);
    }
  }
  CHECK(live_sizes == std::vector<int64_t>{int64_t(usable)});
  std::free(grown);
}

TEST_CASE("sampled objects are freed from another thread")
{
  const size_t sizes[] = {16, 48, 1024, 4096, 20000, 65536, 70000, 1 << 20};
  constexpr size_t PER_SIZE = 50;
  kept.reserve(2 * std::size(sizes) * PER_SIZE);
  TempDir dir;
  SampledAtSites exact;
  for (int pass = 0; pass < 2; pass++)
  {
    // Allocated on one thread, freed on another while the first still runs;
    // the second round reuses the pool memory the first freed.
    std::vector<void*> handed;
    std::mutex lock;
    std::condition_variable changed;
    bool ready = false, freed = false;
    std::thread owner([&] {
      std::vector<void*> mine;
      for (size_t size : sizes)
        for (size_t i = 0; i < PER_SIZE; i++)
        {
          void* p = sampled_site_handed_over(size);
          fill(p, size, i);
          mine.push_back(p);
        }
      std::unique_lock<std::mutex> g(lock);
      handed = mine;
      ready = true;
      changed.notify_all();
      changed.wait(g, [&] { return freed; });
    });
    {
      std::unique_lock<std::mutex> g(lock);
      changed.wait(g, [&] { return ready; });
    }
    size_t damaged = 0;
    on_fresh_thread([&] {
      for (size_t i = 0; i < handed.size(); i++)
      {
        if (!filled(handed[i], sizes[i / PER_SIZE], i % PER_SIZE))
          damaged++;
        std::free(handed[i]);
      }
    });
    {
      std::lock_guard<std::mutex> g(lock);
      freed = true;
    }
    changed.notify_all();
    owner.join();
    CHECK(damaged == 0);
  }
  kept.clear(); // all freed above
  SiteValues profile = profile_of(dir, "sampled_site_handed_over");
  CHECK(profile.alloc_objects == int64_t(2 * std::size(sizes) * PER_SIZE));
  CHECK(profile.inuse_objects == 0);
  CHECK(profile.inuse_space == 0);
}

// Guarded objects are small objects in slots of their own, outside the
// classes' slabs, and the slots' reservation (guard pages and all) is never
// resident: the statistics, and mallinfo2 from them, count each guarded
// object's usable bytes as live and only its pages as resident.  (They had
// counted none of the objects, and the whole reservation, 16 MiB here, as
// resident.)
TEST_CASE("the statistics count guarded objects and not their slots' reservation")
{
  constexpr size_t GUARDED = 48, LIMIT = 64; // 2 * 64 slots of 128 KiB
  snmalloc::Stats before = snmalloc::stats();
  ProfilingAt exact(1);
  REQUIRE(snmalloc::profile::set_guard(LIMIT, 1000000) == 0);
  std::vector<void*> objects;
  size_t guarded = 0, guarded_bytes = 0, other_bytes = 0;
  for (size_t i = 0; guarded < GUARDED && i < 8 * GUARDED; i++)
  {
    size_t size = 24 + (i * 997) % 20000;
    uint64_t count = snmalloc::profile::guarded_total();
    void* p = std::malloc(size);
    REQUIRE(p != nullptr);
    std::memset(p, 0x3c, size);
    objects.push_back(p);
    if (snmalloc::profile::guarded_total() != count)
    {
      guarded++;
      guarded_bytes += malloc_usable_size(p);
    }
    else
      other_bytes += malloc_usable_size(p);
  }
  REQUIRE(guarded == GUARDED);
  snmalloc::Stats held = snmalloc::stats();
  size_t live_added = held.small_live_bytes - before.small_live_bytes;
  INFO(
    "guarded " << guarded_bytes << " bytes, others " << other_bytes << "; live added "
               << live_added << ", resident added "
               << int64_t(held.resident_bytes) - int64_t(before.resident_bytes));
  CHECK(live_added >= guarded_bytes + other_bytes);
  // Sampled objects are counted at their pool blocks' sizes (with their
  // records); the slack here is far below the guarded bytes.
  CHECK(live_added <= 2 * (guarded_bytes + other_bytes) + (size_t(64) << 10));
  CHECK(held.resident_bytes < before.resident_bytes + (size_t(8) << 20));
  for (void* p : objects)
    std::free(p);
  snmalloc::Stats after = snmalloc::stats();
  CHECK(after.small_live_bytes <= before.small_live_bytes + (size_t(64) << 10));
  CHECK(snmalloc::profile::set_guard(0) == 0);
}
