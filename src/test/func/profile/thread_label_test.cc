// Every sample of live objects carries its allocating thread's OS id as
// the numeric label `thread`: -tagfocus=thread=ID shows what that thread
// allocated and is still live.  (The cumulative alloc_* figures are per
// site, across threads.)  Exact mode (R == 1): two threads allocate at the
// same site, different counts, and each thread's view must show exactly
// its own.
#include "support/files.h"
#include "support/pprof_output.h"
#include "support/profiling.h"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <sys/syscall.h>
#include <unistd.h>

using namespace snmalloc_test;

namespace
{
  constexpr size_t SIZE = 1000;
  constexpr size_t COUNTS[] = {100, 300};
} // namespace

__attribute__((noinline)) void thread_label_site(std::vector<void*>& held, size_t n)
{
  for (size_t i = 0; i < n; i++)
    held.push_back(std::malloc(SIZE));
}

TEST_CASE("thread label: -tagfocus=thread=ID separates threads")
{
  TempDir dir;
  std::vector<void*> held[2];
  long ids[2] = {};
  for (auto& h : held)
    h.reserve(1000);
  {
    ProfilingAt exact(1);
    for (size_t t = 0; t < 2; t++)
      on_fresh_thread([&, t] {
        ids[t] = ::syscall(SYS_gettid);
        thread_label_site(held[t], COUNTS[t]);
      });
    dump_or_fail(dir.file("threads.pb.gz"));
  }
  REQUIRE(ids[0] != ids[1]);
  SiteTable all(dir.file("threads.pb.gz"));
  CHECK(all["thread_label_site"].inuse_objects == int64_t(COUNTS[0] + COUNTS[1]));
  CHECK(all["thread_label_site"].alloc_objects == int64_t(COUNTS[0] + COUNTS[1]));
  for (size_t t = 0; t < 2; t++)
  {
    SiteTable mine(dir.file("threads.pb.gz"), "-tagfocus=thread=" + std::to_string(ids[t]));
    INFO("thread " << t << " id " << ids[t]);
    CHECK(mine["thread_label_site"].inuse_objects == int64_t(COUNTS[t]));
    CHECK(mine["thread_label_site"].inuse_space == int64_t(COUNTS[t] * usable_size_unsampled(SIZE)));
  }
  for (auto& h : held)
    for (void* p : h)
      std::free(p);
}
