// Allocation labels whose strings the program owns: a push keeps the
// caller's key and value, which stay unchanged until the matching pop and
// are the caller's again after it.  Every allocation is sampled (rate=1),
// so each set of labels must carry exactly the objects allocated under it,
// read back with `go tool pprof -raw`: buffers rewritten after each pop,
// sets changed many times between two samples (pushes and pops with no
// allocation between, and a stretch of allocations sampled at so low a
// rate that none is), nesting past the 8 labels a set keeps, and a value
// past the 64 bytes one keeps.
#include "support/files.h"
#include "support/pprof_output.h"
#include "support/pprof_runner.h"
#include "support/profiling.h"

#include <catch2/catch.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <snmalloc/snmalloc.h>
#include <snmalloc/snmalloc_profile.h>
#include <string>

using namespace snmalloc_test;

namespace
{
  using LabelSet = std::map<std::string, std::string>;

  // "job=batch k1=v03": a set as text, keys in order, "" for no labels.
  std::string text_of(const LabelSet& labels)
  {
    std::string text;
    for (const auto& [key, value] : labels)
      text += (text.empty() ? "" : " ") + key + "=" + value;
    return text;
  }

  // The live objects allocated by `site`, per set of labels they carry.
  std::map<std::string, int64_t> live_by_labels(const std::string& profile, const std::string& site)
  {
    RawProfile raw = read_raw(profile);
    size_t inuse_objects = 0;
    for (size_t at = 0; raw.sample_types.compare(at, 14, "inuse_objects/") != 0; inuse_objects++)
    {
      at = raw.sample_types.find(' ', at);
      REQUIRE(at != std::string::npos);
      at++;
    }
    std::map<std::string, int64_t> live;
    for (const RawSample& sample : raw.samples)
    {
      bool at_site = false;
      for (const std::string& function : sample.functions)
        at_site |= function == site;
      if (at_site && sample.values[inuse_objects] != 0)
        live[text_of(sample.string_labels)] += sample.values[inuse_objects];
    }
    return live;
  }

  // The samples the profile says were taken under cut sets (0 if none).
  int64_t truncated_samples(const std::string& profile)
  {
    std::string comments = pprof_ok("-comments '" + profile + "'");
    INFO("pprof -comments:\n" << comments);
    size_t at = comments.find("allocation labels were truncated");
    if (at == std::string::npos)
      return 0;
    at = comments.find("): ", at);
    REQUIRE(at != std::string::npos);
    return std::stoll(comments.substr(at + 3));
  }

  // Objects held until the end of a test, in a fixed array: a test
  // allocates nothing of its own under a set it counts.
  struct Held
  {
    Node* chains[64] = {};
    size_t count = 0;

    void add(Node* chain)
    {
      REQUIRE(count < 64);
      chains[count++] = chain;
    }

    ~Held()
    {
      for (size_t i = 0; i < count; i++)
        free_chain(chains[i]);
    }
  };
} // namespace

__attribute__((noinline)) Node* buffer_site(size_t n)
{
  return allocate_chain(1500, n);
}

__attribute__((noinline)) Node* between_samples_site(size_t size, size_t n)
{
  return allocate_chain(size, n);
}

__attribute__((noinline)) Node* deep_site(size_t n)
{
  return allocate_chain(700, n);
}

TEST_CASE("labels: buffers rewritten after each pop label each allocation with what they held")
{
  TempDir dir;
  std::string heap = dir.file("buffers.pb.gz");
  std::map<std::string, int64_t> expected;
  Held held;
  {
    ProfilingAt exact(1);
    on_fresh_thread([&] {
      std::string job = "batch";
      char key[16], value[16], inner[16];
      snmalloc_profile_label_push("job", job.c_str());
      for (int i = 0; i < 24; i++)
      {
        std::snprintf(key, sizeof(key), "k%d", i % 3);
        std::snprintf(value, sizeof(value), "v%02d", i);
        snmalloc_profile_label_push(key, value);
        LabelSet set = {{"job", job}, {key, value}};
        // Some sets see no allocation: nothing is sampled under them.
        if (size_t n = size_t(i % 4); n != 0)
        {
          held.add(buffer_site(n));
          expected[text_of(set)] += int64_t(n);
        }
        if (i % 6 == 0)
        {
          // An inner level from one buffer, rewritten each time, then a
          // pop back to the level below, already sampled under.
          std::snprintf(inner, sizeof(inner), "w%02d", i);
          snmalloc_profile_label_push("inner", inner);
          LabelSet nested = set;
          nested["inner"] = inner;
          held.add(buffer_site(2));
          expected[text_of(nested)] += 2;
          snmalloc_profile_label_pop();
          std::memset(inner, 'x', sizeof(inner) - 1);
          held.add(buffer_site(1));
          expected[text_of(set)] += 1;
        }
        snmalloc_profile_label_pop();
        // The caller's again: the next sample must not read them.
        std::memset(key, 'y', sizeof(key) - 1);
        std::memset(value, 'z', sizeof(value) - 1);
        if (i % 4 == 1)
        {
          held.add(buffer_site(1));
          expected[text_of({{"job", job}})] += 1;
        }
      }
      snmalloc_profile_label_pop();
    });
    dump_or_fail(heap);
  }
  CHECK(live_by_labels(heap, "buffer_site") == expected);
  CHECK(truncated_samples(heap) == 0);
}

TEST_CASE("labels: a sample carries the set in force at it, however often it changed since the last")
{
  TempDir dir;
  std::string heap = dir.file("between.pb.gz");
  std::map<std::string, int64_t> expected;
  Held held;
  int pushed_past_depth = 0;
  // Each stretch allocates a size of its own, never allocated before on
  // the thread: its first allocation takes a new free list, drawn at the
  // rate in force (one sampled at rate=1 holds objects of the rate before).
  constexpr size_t FIRST = 2000, UNSAMPLED = 3000, LAST = 4000;
  on_fresh_thread([&] {
    std::string key = "tenant";
    char value[16] = "first";
    {
      ProfilingAt exact(1);
      snmalloc_profile_label_push(key.c_str(), value);
      held.add(between_samples_site(FIRST, 7));
      expected["tenant=first"] += 7;
      snmalloc_profile_label_pop();
    }
    {
      // Thousands of sets, two levels deep, each over allocations, at a
      // rate where none is sampled (a mean of 1 TiB between samples).
      ProfilingAt rare(size_t(1) << 40);
      for (int i = 0; i < 5000; i++)
      {
        std::snprintf(value, sizeof(value), "u%d", i);
        snmalloc_profile_label_push(key.c_str(), value);
        snmalloc_profile_label_push("request", value);
        free_chain(between_samples_site(UNSAMPLED, 3));
        snmalloc_profile_label_pop();
        snmalloc_profile_label_pop();
      }
      std::snprintf(value, sizeof(value), "second");
      snmalloc_profile_label_push(key.c_str(), value);
      free_chain(between_samples_site(UNSAMPLED, 100));
    }
    ProfilingAt exact(1);
    // Still under tenant=second, pushed before any of these samples.
    held.add(between_samples_site(LAST, 11));
    expected["tenant=second"] += 11;
    snmalloc_profile_label_pop();
    // Sets pushed and popped with no allocation between, the same buffer
    // rewritten each time, then one left pushed.
    for (int i = 0; i < 1000; i++)
    {
      std::snprintf(value, sizeof(value), "gone%d", i);
      snmalloc_profile_label_push(key.c_str(), value);
      pushed_past_depth |= snmalloc_profile_label_push("request", value);
      snmalloc_profile_label_pop();
      snmalloc_profile_label_pop();
    }
    std::snprintf(value, sizeof(value), "fourth");
    snmalloc_profile_label_push(key.c_str(), value);
    held.add(between_samples_site(LAST, 5));
    expected["tenant=fourth"] += 5;
    snmalloc_profile_label_pop();
    held.add(between_samples_site(LAST, 3));
    expected[""] += 3;
    dump_or_fail(heap);
  });
  CHECK(pushed_past_depth == 0);
  CHECK(live_by_labels(heap, "between_samples_site") == expected);
}

TEST_CASE("labels: nested past eight and past 64 bytes, each sample has the set cut as it was then")
{
  TempDir dir;
  std::string heap = dir.file("deep.pb.gz");
  std::map<std::string, int64_t> expected;
  Held held;
  constexpr int DEPTH = 12, KEPT = 8;
  int pushed[DEPTH], popped[DEPTH + 1], long_pushed = -1;
  std::string long_value(100, 'L');
  // Down: k labels in force allocate k objects; back up, 20 + k.  What
  // the thread will have allocated, reckoned before: the thread allocates
  // nothing but the counted objects, so that only they are counted as
  // taken under cut sets.
  {
    LabelSet kept;
    for (int d = 0; d < DEPTH; d++)
    {
      if (d < KEPT)
        kept["d" + std::to_string(d)] = "a" + std::to_string(d);
      expected[text_of(kept)] += d + 1;
    }
    for (int d = DEPTH - 1; d > 0; d--)
    {
      if (d < KEPT)
        kept.erase("d" + std::to_string(d));
      expected[text_of(kept)] += 20 + d;
    }
    expected["long=" + long_value.substr(0, 64)] += 4;
    expected[""] += 6;
  }
  {
    ProfilingAt exact(1);
    on_fresh_thread([&] {
      char keys[DEPTH][8], values[DEPTH][8];
      for (int d = 0; d < DEPTH; d++)
      {
        std::snprintf(keys[d], sizeof(keys[d]), "d%d", d);
        std::snprintf(values[d], sizeof(values[d]), "a%d", d);
        pushed[d] = snmalloc_profile_label_push(keys[d], values[d]);
        held.add(deep_site(size_t(d + 1)));
      }
      for (int d = DEPTH - 1; d >= 0; d--)
      {
        popped[d] = snmalloc_profile_label_pop();
        // A popped level's buffers are rewritten at once.
        std::memset(keys[d], '?', sizeof(keys[d]) - 1);
        std::memset(values[d], '?', sizeof(values[d]) - 1);
        if (d > 0)
          held.add(deep_site(size_t(20 + d)));
      }
      popped[DEPTH] = snmalloc_profile_label_pop();
      // A value over 64 bytes: found at the sample, cut there.
      long_pushed = snmalloc_profile_label_push("long", long_value.c_str());
      held.add(deep_site(4));
      snmalloc_profile_label_pop();
      held.add(deep_site(6));
    });
    dump_or_fail(heap);
  }
  for (int d = 0; d < DEPTH; d++)
  {
    INFO("push at depth " << d);
    CHECK(pushed[d] == (d < KEPT ? 0 : E2BIG));
    CHECK(popped[d] == 0);
  }
  CHECK(popped[DEPTH] == EINVAL);
  CHECK(long_pushed == 0);
  CHECK(live_by_labels(heap, "deep_site") == expected);
  // Past eight: 9..12 objects down, 29..31 back up; and the long value's 4.
  CHECK(truncated_samples(heap) == (9 + 10 + 11 + 12) + (29 + 30 + 31) + 4);
}
