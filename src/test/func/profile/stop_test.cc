// stop(): no sample is taken afterwards, on new threads or on threads that
// were sampling when it was called, but the samples taken before stay in
// the profile until their objects are freed.  start() again resumes.
#include "support/files.h"
#include "support/pprof_output.h"
#include "support/profiling.h"

#include <catch2/catch.hpp>
#include <condition_variable>
#include <cstdlib>
#include <mutex>

using namespace snmalloc_test;

extern "C" int snmalloc_profile_start(size_t mean_interval_bytes);
extern "C" int snmalloc_profile_stop(void);
extern "C" int snmalloc_profile_is_active(void);

namespace
{
  constexpr size_t OBJECTS = 400;
  constexpr size_t SMALL = 64, LARGE = 200000;

  struct Kept
  {
    std::vector<void*> before, after_new_thread, after_same_thread, resumed;

    Kept()
    {
      for (auto* v : {&before, &after_new_thread, &after_same_thread, &resumed})
        v->reserve(2 * OBJECTS);
    }

    ~Kept()
    {
      for (auto* v : {&before, &after_new_thread, &after_same_thread, &resumed})
        for (void* p : *v)
          std::free(p);
    }
  };

  // Small and large objects: small ones are sampled at refill, large ones
  // on their own slow path.  Inlined, so each site is the allocating frame.
  __attribute__((always_inline)) inline void allocate_into(std::vector<void*>& v)
  {
    for (size_t i = 0; i < OBJECTS; i++)
      v.push_back(std::malloc(i % 10 == 0 ? LARGE : SMALL));
  }
} // namespace

__attribute__((noinline)) void stop_site_before(Kept& k)
{
  allocate_into(k.before);
}

__attribute__((noinline)) void stop_site_after_new_thread(Kept& k)
{
  allocate_into(k.after_new_thread);
}

__attribute__((noinline)) void stop_site_after_same_thread(Kept& k)
{
  allocate_into(k.after_same_thread);
}

__attribute__((noinline)) void stop_site_resumed(Kept& k)
{
  allocate_into(k.resumed);
}

TEST_CASE("stop: no samples after it and earlier samples stay until freed")
{
  TempDir dir;
  Kept kept;

  // Through the C API; stopped at the end even if a check fails early.
  struct StopAtExit
  {
    ~StopAtExit()
    {
      snmalloc::profile::stop();
    }
  } stop_at_exit;
  REQUIRE(snmalloc_profile_start(1) == 0);
  REQUIRE(snmalloc_profile_is_active() == 1);

  // A thread that samples, sees stop() happen, then allocates again.
  std::mutex lock;
  std::condition_variable changed;
  bool sampled = false, stopped = false;
  std::thread survivor([&] {
    stop_site_before(kept);
    std::unique_lock<std::mutex> g(lock);
    sampled = true;
    changed.notify_all();
    changed.wait(g, [&] { return stopped; });
    g.unlock();
    stop_site_after_same_thread(kept);
  });
  {
    std::unique_lock<std::mutex> g(lock);
    changed.wait(g, [&] { return sampled; });
  }
  REQUIRE(snmalloc_profile_stop() == 0);
  REQUIRE(snmalloc_profile_is_active() == 0);
  REQUIRE_FALSE(snmalloc::profile::is_active());
  {
    std::lock_guard<std::mutex> g(lock);
    stopped = true;
  }
  changed.notify_all();
  survivor.join();
  on_fresh_thread([&] { stop_site_after_new_thread(kept); });

  // A dump while stopped shows what is live from before.
  dump_or_fail(dir.file("stopped.pb.gz"));
  SiteTable stopped_profile(dir.file("stopped.pb.gz"));
  SiteValues before = stopped_profile["stop_site_before"];
  CHECK(before.alloc_objects == int64_t(OBJECTS));
  CHECK(before.inuse_objects == int64_t(OBJECTS));
  for (const char* site : {"stop_site_after_same_thread", "stop_site_after_new_thread"})
  {
    INFO(site);
    CHECK_FALSE(stopped_profile.contains(site));
    CHECK(stopped_profile[site].alloc_objects == 0);
  }

  // Freed samples leave the profile even while stopped.
  for (size_t i = 0; i < OBJECTS / 2; i++)
    std::free(kept.before[i]);
  kept.before.erase(kept.before.begin(), kept.before.begin() + OBJECTS / 2);
  dump_or_fail(dir.file("half-freed.pb.gz"));
  SiteValues half = SiteTable(dir.file("half-freed.pb.gz"))["stop_site_before"];
  CHECK(half.alloc_objects == int64_t(OBJECTS));
  CHECK(half.inuse_objects == int64_t(OBJECTS / 2));

  // start() again: sampling resumes.
  {
    ProfilingAt exact(1);
    on_fresh_thread([&] { stop_site_resumed(kept); });
    dump_or_fail(dir.file("resumed.pb.gz"));
  }
  SiteTable resumed(dir.file("resumed.pb.gz"));
  CHECK(resumed["stop_site_resumed"].inuse_objects == int64_t(OBJECTS));
  CHECK(resumed["stop_site_after_new_thread"].alloc_objects == 0);
}
