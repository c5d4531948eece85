// Allocation labels read back through `go tool pprof`: two tenants
// allocate through the same function, 3:1 in bytes, each under its own
// label.  `-tagfocus=tenant=...` must give each its share of the live heap
// (heap profile) and of the allocations (allocs): exactly at rate=1, where
// every allocation is a sample of weight 1, and within five standard
// deviations of the sampling at 512 KiB, where 400 MiB are allocated (the
// interval its setting names: support/profiling.h).
#include "support/files.h"
#include "support/pprof_output.h"
#include "support/profiling.h"
#include "support/pprof_runner.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <snmalloc/snmalloc.h>

using namespace snmalloc_test;

namespace
{
  const size_t INTERVAL = test_setting_number(0);
  const bool EXACT = INTERVAL == 1;

  // 16 KiB objects: 400 MiB at 512 KiB, 64 MiB where each is a sample (a
  // stack walk).  Rounds of three acme chunks and one beta chunk, so that
  // neither tenant's objects come in one run of the sampler.
  constexpr size_t SIZE = 16 * 1024;
  constexpr size_t CHUNK = 64;
  const size_t ROUNDS = EXACT ? 16 : 100;
  const size_t ACME = 3 * CHUNK * ROUNDS, BETA = CHUNK * ROUNDS;

  // Five standard deviations of an estimate of n objects of SIZE bytes
  // (in bytes when `bytes`), each sampled with p = 1 - exp(-size/R) and
  // weighted 1/p: sigma^2 = n (1 - p) / p objects; none at rate=1.
  void check_estimate(const char* what, int64_t estimate, size_t n, bool bytes)
  {
    double unit = bytes ? double(usable_size_unsampled(SIZE)) : 1;
    double truth = double(n) * unit;
    INFO(what << ": estimate " << estimate << ", truth " << truth);
    if (EXACT)
    {
      CHECK(estimate == int64_t(truth));
      return;
    }
    double p = -std::expm1(-double(SIZE) / double(INTERVAL));
    double sigma = std::sqrt(double(n) * (1 - p) / p) * unit;
    INFO("sigma " << sigma);
    CHECK(std::fabs(double(estimate) - truth) <= 5 * sigma + unit);
  }
} // namespace

__attribute__((noinline)) void tenant_site(Node*& held, size_t n)
{
  for (size_t i = 0; i < n; i++)
  {
    auto* node = static_cast<Node*>(std::malloc(SIZE));
    node->next = held;
    held = node;
  }
}

TEST_CASE("labels: two tenants through one stack, 3:1, apart with -tagfocus")
{
  require_test_setting();
  TempDir dir;
  std::string heap = dir.file("heap.pb.gz");
  Node* held[2] = {nullptr, nullptr};
  {
    ProfilingAt profiling(INTERVAL);
    on_fresh_thread([&] {
      for (size_t round = 0; round < ROUNDS; round++)
      {
        {
          snmalloc::profile::ScopedLabel tenant("tenant", "acme");
          tenant_site(held[0], 3 * CHUNK);
        }
        snmalloc::profile::ScopedLabel tenant("tenant", "beta");
        tenant_site(held[1], CHUNK);
      }
    });
    dump_or_fail(heap);
  }
  const char* names[] = {"acme", "beta"};
  const size_t counts[] = {ACME, BETA};
  for (size_t t = 0; t < 2; t++)
  {
    INFO("tenant " << names[t]);
    SiteTable mine(heap, std::string("-tagfocus=tenant=") + names[t]);
    check_estimate("inuse_objects", mine["tenant_site"].inuse_objects, counts[t], false);
    check_estimate("inuse_space", mine["tenant_site"].inuse_space, counts[t], true);
    check_estimate("alloc_objects", mine["tenant_site"].alloc_objects, counts[t], false);
    check_estimate("alloc_space", mine["tenant_site"].alloc_space, counts[t], true);
  }
  // Both tenants together are the whole site; the tags view lists both
  // values of the one key asked for.
  SiteTable all(heap);
  check_estimate("all inuse_objects", all["tenant_site"].inuse_objects, ACME + BETA, false);
  std::string tags = pprof_ok("-tags -tagshow=tenant '" + self_exe() + "' '" + heap + "'");
  INFO("pprof -tags:\n" << tags);
  CHECK(tags.find("tenant:") != std::string::npos);
  CHECK(tags.find("acme") != std::string::npos);
  CHECK(tags.find("beta") != std::string::npos);
  for (Node* h : held)
    free_chain(h);
}
