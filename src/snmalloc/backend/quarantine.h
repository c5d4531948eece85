#pragma once
// Layer backend: the checks build's quarantine of freed large runs.
//
// A freed run, already inaccessible, waits here, oldest first out, until
// later frees push it past the bounds; only then do its chunks become free,
// so that its address is not handed out again at once and a write through
// a stale pointer faults for that long.  Its pages stay resident: giving
// them back made every reuse fault them in again (large-object churn: 1.2 M
// page faults for 5,000 operations against 37 k, 36 times slower).  So the
// bound is the resident memory it holds, 16 MiB of objects: 16 frees of
// 1 MiB objects, 256 of 64 KiB.  Not thread-safe: the backend holds its
// lock around every call.

#include "../ds/ds.h"

namespace snmalloc
{
  class RunQuarantine
  {
  public:
    static constexpr size_t MAX_BYTES = size_t(16) << 20;
    // The default build quarantines nothing: one slot, never used.
    static constexpr size_t MAX_RUNS = config::checks ? 1024 : 1;

    struct Run
    {
      size_t index = 0; // first chunk, relative to the arena base
      size_t chunks = 0;
      size_t resident = 0; // bytes that may hold pages (not the guards)
    };

  private:
    Run runs_[MAX_RUNS] = {};
    size_t oldest_ = 0;
    size_t count_ = 0;
    size_t resident_ = 0;

  public:
    void add(Run run)
    {
      runs_[(oldest_ + count_) % MAX_RUNS] = run;
      count_++;
      resident_ += run.resident;
    }

    // Give back the pages of every run waiting (malloc_trim): they stay
    // quarantined, inaccessible, and fault in again only when reused.
    // The bytes that may have held pages.
    size_t decommit_all()
    {
      size_t bytes = 0;
      for (size_t i = 0; i < count_; i++)
      {
        Run& run = runs_[(oldest_ + i) % MAX_RUNS];
        if (run.resident == 0)
          continue;
        Pal::decommit(pagemap.chunk_address(run.index), run.chunks << config::CHUNK_BITS);
        bytes += run.resident;
        run.resident = 0;
      }
      resident_ = 0;
      return bytes;
    }

    // Take the oldest run if the quarantine is beyond its bounds.
    bool take_overflow(Run& run)
    {
      if (count_ < MAX_RUNS && resident_ <= MAX_BYTES)
        return false;
      return take_oldest(run);
    }

    // Take the oldest run, if any.
    bool take_oldest(Run& run)
    {
      if (count_ == 0)
        return false;
      run = runs_[oldest_];
      oldest_ = (oldest_ + 1) % MAX_RUNS;
      count_--;
      resident_ -= run.resident;
      return true;
    }
  };
} // namespace snmalloc
