#pragma once
// Layer profile/core: the process-wide profiling settings that start() and
// stop() change and every thread's sampler reads at its next refill.

#include "sample_mode.h"

namespace snmalloc::profile
{
  constexpr size_t DEFAULT_DEPTH = 64;
  constexpr size_t MAX_DEPTH = 256;

  // Guarded sampling (guarded_slots.h): at most this many objects guarded
  // at a time, and this many new ones a second by default.
  constexpr size_t MAX_GUARD = size_t(1) << 16;
  constexpr size_t DEFAULT_GUARD_PER_SECOND = 1000;

  struct Settings
  {
    // The sampling rate, in bytes or allocations as `mode` says; 0 while
    // profiling is stopped.
    std::atomic<size_t> interval{0};
    std::atomic<SampleMode> mode{SampleMode::Bytes};
    // Bumped by every start() and stop(): a sampler that sees a new epoch
    // redraws its distance to the next sample with the new interval and mode.
    // From 1: 0 is no epoch (Profiler::CoreState's NOT_COUNTING).
    std::atomic<uint64_t> epoch{1};
    std::atomic<size_t> max_depth{DEFAULT_DEPTH};
    std::atomic<int64_t> start_time_ns{0};
    // CLOCK_REALTIME - CLOCK_MONOTONIC, taken at every start(): a sample's
    // wall-clock time is its monotonic birth plus this, off by as much as
    // the wall clock was stepped since (a slew moves both clocks alike).
    std::atomic<int64_t> wall_minus_monotonic_ns{0};
    // Samples not taken because memory for their record or stack ran out
    // (the allocation itself was then served unsampled, or failed).
    std::atomic<uint64_t> samples_dropped{0};
    // For the profiler's own metrics (/metrics): profiles encoded for a dump
    // or an HTTP client, those that failed counted apart.  (Samples taken
    // are counted per list, SampleList::taken: a count here, written at
    // every sample, shared its line with `epoch`, which every thread's
    // refill reads.)
    std::atomic<uint64_t> dumps{0};
    std::atomic<uint64_t> dump_failures{0};
  };

  inline Settings settings;

  // Set while this thread is inside the profiler (capturing a stack,
  // dumping): allocations it makes then are never sampled, so the unwinder
  // and the dump may call malloc without recursing into the profiler.
  inline thread_local bool in_profiler = false;

  class ProfilerGuard
  {
    bool was_;

  public:
    ProfilerGuard() : was_(in_profiler)
    {
      in_profiler = true;
    }
    ~ProfilerGuard()
    {
      in_profiler = was_;
    }
    ProfilerGuard(const ProfilerGuard&) = delete;
    ProfilerGuard& operator=(const ProfilerGuard&) = delete;
  };
} // namespace snmalloc::profile
