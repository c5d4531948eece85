#pragma once
// Layer profile: the C++ API.
//
//   start(R)   begin sampling, one sample per R allocated bytes on average
//              (R >= 1; R == 1 samples every allocation).  Threads pick the
//              new interval up at their next refill.  Calling start again
//              changes R; samples already taken keep the R they were taken
//              with, which the dump uses to unbias them.
//   start(mode, N)  the same in one of the modes of sample_mode.h: for
//              count and sizeclass, N is a number of allocations.
//   stop()     take no more samples.  Samples already taken stay in the
//              profile until their objects are freed, so a dump after stop
//              still shows what is live.
//   dump(path) write a gzipped pprof profile of the live heap (inuse_*) and
//              of everything sampled since the process started (alloc_*).
//              Safe while other threads allocate and free: each thread's
//              samples are copied under a short lock, the rest runs
//              unlocked.  Written to a temporary file renamed into place,
//              so readers never see half a profile.  Returns the errno of
//              what failed, never aborts.
//   dump_peak(path)  the same, of the live heap as it was at its peak.
//   dump_footprint(path)  the footprint profile (footprint/): every
//              resident byte of the process, by site, by what the
//              allocator holds and by kind of mapping, adding up to VmRSS.
//   dump_lifetimes(path)  the lifetime profile (lifetime_encoder.h): per
//              site, the sampled objects freed since the process started,
//              by lifetime bucket and freeing thread, and those still alive
//              by age.
//   set_guard(N)  guard at most N sampled objects at a time (0: off), at
//              most `per_second` new ones a second (guarded_slots.h); the
//              SIGSEGV handler that reports their faults is installed at
//              the first call.  Guarding takes sampled objects, so it needs
//              sampling started; any mode works, sizeclass covers every
//              size alike.

#include "footprint/footprint_profile.h"
#include "pprof/dump_file.h"
#include "guard/guard_signal.h"
#include "lifetime_profile.h"
#include "pprof/pprof_encoder.h"
#include "snapshot.h"

#include <cstdint>
#include <cstring>

namespace snmalloc::profile
{
  struct DumpResult
  {
    int error = 0;

    bool ok() const
    {
      return error == 0;
    }

    const char* message() const
    {
      return error == 0 ? "ok" : std::strerror(error);
    }
  };

  // CLOCK_REALTIME - CLOCK_MONOTONIC, from the wall clock read between two
  // monotonic reads, the closest of three tries: a thread preempted between
  // two reads would date every sample that much early (on this VM 27 of
  // 2,000,000 read pairs were 1-10 ms apart, 13 were 10-100 us).
  inline int64_t wall_minus_monotonic_ns()
  {
    int64_t best_gap = INT64_MAX;
    int64_t offset = 0;
    for (int i = 0; i < 3; i++)
    {
      int64_t before = Pal::precise_monotonic_ns();
      int64_t wall = Pal::time_ns();
      int64_t gap = Pal::precise_monotonic_ns() - before;
      if (gap < best_gap)
      {
        best_gap = gap;
        offset = wall - (before + gap / 2);
      }
    }
    return offset;
  }

  inline int start(SampleMode mode, size_t rate)
  {
    if (rate == 0 || uint32_t(mode) > uint32_t(SampleMode::SizeClass))
      return EINVAL;
    if (settings.interval.load() == 0)
      settings.start_time_ns.store(Pal::time_ns());
    settings.wall_minus_monotonic_ns.store(wall_minus_monotonic_ns());
    settings.mode.store(mode);
    settings.interval.store(rate);
    settings.epoch.fetch_add(1, std::memory_order_release);
    return 0;
  }

  inline int start(size_t mean_interval_bytes = DEFAULT_INTERVAL)
  {
    return start(SampleMode::Bytes, mean_interval_bytes);
  }

  inline int stop()
  {
    settings.interval.store(0);
    settings.epoch.fetch_add(1, std::memory_order_release);
    return 0;
  }

  inline bool is_active()
  {
    return settings.interval.load() != 0;
  }

  inline size_t interval()
  {
    return settings.interval.load();
  }

  // The mode of the last start() (bytes before any).
  inline SampleMode mode()
  {
    return settings.mode.load();
  }

  // Samples dropped because memory ran out, since the process started.
  inline uint64_t samples_dropped()
  {
    return settings.samples_dropped.load(std::memory_order_relaxed);
  }

  // 0, or EINVAL (N over MAX_GUARD, per_second 0), EBUSY (N over the
  // reservation the first N made), ENOMEM, or the errno of a failed
  // sigaction.
  inline int set_guard(size_t limit, size_t per_second = DEFAULT_GUARD_PER_SECOND)
  {
    if (limit != 0 && !GuardSignal::install())
      return errno;
    return guarded_slots.configure(limit, per_second);
  }

  inline size_t guard_limit()
  {
    return guarded_slots.limit();
  }

  // Objects guarded since the process started.
  inline uint64_t guarded_total()
  {
    return guarded_slots.guarded_total();
  }

  // Samples recorded since the process started (dropped ones aside).
  inline uint64_t samples_taken()
  {
    return sample_lists.total_taken();
  }

  // Samples of objects still live.
  inline size_t live_samples()
  {
    return sample_lists.total_count();
  }

  // Profiles encoded for a dump or an HTTP client, and those that failed.
  inline uint64_t dumps_written()
  {
    return settings.dumps.load(std::memory_order_relaxed);
  }

  inline uint64_t dump_failures()
  {
    return settings.dump_failures.load(std::memory_order_relaxed);
  }

  // Frames recorded per sample (1..MAX_DEPTH); default 64.
  inline int set_max_depth(size_t depth)
  {
    if (depth == 0 || depth > MAX_DEPTH)
      return EINVAL;
    settings.max_depth.store(depth);
    return 0;
  }

  // Replace the stack source (nullptr restores the unwind-table walk).  For
  // tests.
  inline void set_stack_source(StackSource source)
  {
    stack_source.store(source, std::memory_order_release);
  }

  namespace detail
  {
    // A profile's header stamped with `when`, covering `duration`
    // nanoseconds (negative: since profiling started).
    inline ProfileHeader profile_header(
      int64_t when, const char* default_sample_type, int64_t duration)
    {
      int64_t started = settings.start_time_ns.load();
      size_t r = settings.interval.load();
      SampleMode m = settings.mode.load();
      if (duration < 0)
        duration = started != 0 && when > started ? when - started : 0;
      return ProfileHeader{
        r != 0 ? r : default_rate(m),
        when,
        duration,
        settings.samples_dropped.load(std::memory_order_relaxed),
        m,
        default_sample_type,
        label_sets.truncated_samples()};
    }

    // A profile of `rows` stamped with `when`, covering `duration`
    // nanoseconds (negative: since profiling started).
    inline std::vector<uint8_t> encode_rows(
      const std::vector<ProfileBucket>& rows,
      int64_t when,
      const char* default_sample_type = "inuse_space",
      int64_t duration = -1)
    {
      std::vector<uint8_t> bytes;
      encode_pprof(profile_header(when, default_sample_type, duration), rows.data(), rows.size(), bytes);
      return bytes;
    }

    // A lifetime profile of `rows`, as encode_rows; `lifetime` (with
    // `-mean`, the mean lifetime) is what pprof shows by default.
    inline std::vector<uint8_t>
    encode_lifetime_rows(const LifetimeRows& rows, int64_t when, int64_t duration = -1)
    {
      std::vector<LifetimeRow> list;
      list.reserve(rows.size());
      for (const auto& kv : rows)
        list.push_back(kv.second);
      std::vector<uint8_t> bytes;
      encode_lifetime_pprof(
        profile_header(when, "lifetime", duration), list.data(), list.size(),
        LIFETIME_BUCKET_NAMES, bytes);
      return bytes;
    }

    // The frees so far and the objects alive now.
    inline std::vector<uint8_t> encode_lifetime_profile()
    {
      LifetimeRows rows = freed_lifetime_rows();
      add_live_lifetime_rows(rows);
      return encode_lifetime_rows(rows, Pal::time_ns());
    }

    // A profile of `live` as the in-use figures, stamped with `when`.
    inline std::vector<uint8_t> encode_profile(const std::vector<SampleView>& live, int64_t when)
    {
      return encode_rows(aggregate(live).rows, when);
    }

    // Counts a profile made for a dump or a client: 0 or its errno.
    inline int count_dump(int error)
    {
      (error == 0 ? settings.dumps : settings.dump_failures)
        .fetch_add(1, std::memory_order_relaxed);
      return error;
    }

    inline std::vector<uint8_t> encode_current_profile()
    {
      return encode_profile(snapshot_live_samples(), Pal::time_ns());
    }

    // The footprint profile, its rows' total against VmRSS in a comment.
    inline std::vector<uint8_t> encode_footprint_profile()
    {
      int64_t when = Pal::time_ns();
      Footprint f = read_footprint();
      double total = 0;
      for (const FootprintRow& row : f.rows)
        total += row.resident_bytes;
      std::string note = "resident rows total " + std::to_string(uint64_t(total)) +
        " bytes; VmRSS " + std::to_string(f.vm_rss) + " bytes";
      std::vector<uint8_t> bytes;
      encode_footprint_pprof(
        profile_header(when, "resident_space", 0), f.rows.data(), f.rows.size(), note, bytes);
      return bytes;
    }

    // The peak-heap profile: in-use figures as at the peak, stamped with
    // its time (now, before any peak).
    inline std::vector<uint8_t> encode_peak_profile()
    {
      PeakProfile::Copy peak = peak_profile.copy();
      return encode_profile(peak.samples, peak.time_ns != 0 ? peak.time_ns : Pal::time_ns());
    }
  } // namespace detail

  namespace detail
  {
    // Encode a profile and hand the bytes to `write`, which returns 0 or an
    // errno; nothing escapes as an exception.
    template<typename Write>
    DumpResult encode_and_write(
      Write&& write, std::vector<uint8_t> (*encode)() = encode_current_profile)
    {
      ProfilerGuard guard;
      try
      {
        std::vector<uint8_t> bytes = encode();
        return {count_dump(write(bytes.data(), bytes.size()))};
      }
      catch (const std::bad_alloc&)
      {
        return {count_dump(ENOMEM)};
      }
    }

    // A profile by `encode`, gzipped to a file written whole or not at all.
    inline DumpResult encode_to_path(const char* path, std::vector<uint8_t> (*encode)())
    {
      if (path == nullptr || *path == '\0')
        return {EINVAL};
      return encode_and_write(
        [path](const uint8_t* data, size_t size) {
          return write_gzip_file_atomic(path, data, size);
        },
        encode);
    }

    // The same, gzipped to an open descriptor.
    inline DumpResult encode_to_fd(int fd, std::vector<uint8_t> (*encode)())
    {
      if (fd < 0)
        return {EBADF};
      return encode_and_write(
        [fd](const uint8_t* data, size_t size) { return write_gzip_fd(fd, data, size); },
        encode);
    }
  } // namespace detail

  inline DumpResult dump(const char* path)
  {
    return detail::encode_to_path(path, detail::encode_current_profile);
  }

  inline DumpResult dump(int fd)
  {
    return detail::encode_to_fd(fd, detail::encode_current_profile);
  }

  // The same for the peak-heap profile: the live heap as it was when the
  // estimated live heap was highest (peak_profile.h).  Its alloc_* figures
  // are those of now.
  inline DumpResult dump_peak(const char* path)
  {
    return detail::encode_to_path(path, detail::encode_peak_profile);
  }

  inline DumpResult dump_peak(int fd)
  {
    return detail::encode_to_fd(fd, detail::encode_peak_profile);
  }

  // The footprint profile, written as dump(path) writes the heap profile.
  inline DumpResult dump_footprint(const char* path)
  {
    return detail::encode_to_path(path, detail::encode_footprint_profile);
  }

  inline DumpResult dump_footprint(int fd)
  {
    return detail::encode_to_fd(fd, detail::encode_footprint_profile);
  }

  // The lifetime profile, written as dump(path) writes the heap profile.
  inline DumpResult dump_lifetimes(const char* path)
  {
    return detail::encode_to_path(path, detail::encode_lifetime_profile);
  }

  inline DumpResult dump_lifetimes(int fd)
  {
    return detail::encode_to_fd(fd, detail::encode_lifetime_profile);
  }
} // namespace snmalloc::profile
