#pragma once
// Layer profile/samples, stage "keep": the peak-heap profile, the live samples as
// they were when the estimated live heap was highest.
//
// The estimate is the sum of the live samples' unbiased bytes, moved by
// each sample taken and each sampled object freed (never by unsampled
// ones: those paths stay as they are).  When a sample lifts it above the
// level of the last copy by a step, the thread that took the sample copies
// the live set (live_samples.h) and the step is set anew from the copy's
// bytes: a 32nd of them, and at least 16 sampling intervals (16 samples'
// worth in count and sizeclass modes).  So a heap
// hovering at its peak copies nothing, the copy kept is within a 32nd of
// the true peak (plus sampling error), and the copying is bounded: between
// two copies the estimate grew by a 32nd at least, so each sample taken
// pays for about 32 record copies at most, however the heap grows.  One
// copy stalls the sampling thread for a time proportional to the live
// samples (docs/performance.md has the figures); a thread that finds a copy
// in progress skips it, and the next sample past the level copies again.
//
// The copies live in memory mapped for them, never in the heap: a copy is
// made inside malloc, where running out of memory must not throw, and
// growing or dropping a copy must not leave blocks free in the program's
// heap (an exhausted heap would then serve allocations it should fail).
// Two buffers take turns, so a copy reuses the memory of the one before
// last and maps more only when the live set outgrows it.

#include "live_samples.h"
#include "../core/sampler.h"

#include <sys/mman.h>
#include <unistd.h>

namespace snmalloc::profile
{
  // Sample views in mapped memory; see copy_live_samples for the interface.
  class SampleBuffer
  {
    SampleView* data_ = nullptr;
    size_t size_ = 0;
    size_t capacity_ = 0;

    size_t mapped_bytes() const
    {
      return bits::align_up(capacity_ * sizeof(SampleView), Pal::PAGE_SIZE);
    }

  public:
    size_t size() const
    {
      return size_;
    }

    size_t capacity() const
    {
      return capacity_;
    }

    void clear()
    {
      size_ = 0;
    }

    bool grow(size_t n)
    {
      size_t bytes = bits::align_up(n * sizeof(SampleView), Pal::PAGE_SIZE);
      auto* data = static_cast<SampleView*>(profiler_regions.reserve(bytes, "peak profile"));
      if (data == nullptr)
        return false;
      if (size_ != 0)
        std::memcpy(static_cast<void*>(data), data_, size_ * sizeof(SampleView));
      if (data_ != nullptr)
        ::munmap(data_, mapped_bytes());
      data_ = data;
      capacity_ = bytes / sizeof(SampleView);
      return true;
    }

    void push_back(const SampleView& v)
    {
      data_[size_++] = v;
    }

    const SampleView* begin() const
    {
      return data_;
    }

    const SampleView* end() const
    {
      return data_ + size_;
    }

    size_t bytes() const
    {
      return data_ == nullptr ? 0 : mapped_bytes();
    }

    void swap(SampleBuffer& other)
    {
      std::swap(data_, other.data_);
      std::swap(size_, other.size_);
      std::swap(capacity_, other.capacity_);
    }
  };

  class PeakProfile
  {
    static constexpr int64_t STEP_DIVISOR = 32;
    static constexpr int64_t MIN_STEP_INTERVALS = 16;

    std::atomic<int64_t> live_bytes_{0};
    std::atomic<int64_t> copy_above_{0};
    std::atomic<bool> copying_{false};
    std::atomic<uint64_t> copies_{0};
    std::atomic<size_t> mapped_bytes_{0};
    // Guards the copy kept, its bytes and time.
    SpinLock lock_;
    SampleBuffer samples_;
    int64_t bytes_ = 0;
    int64_t time_ns_ = 0;
    // The next copy's buffer (the one before last); the copying thread's.
    SampleBuffer spare_;
    pid_t forking_pid_ = 0; // set under the lock, across fork()

    SNMALLOC_SLOW_PATH void copy_live_set(int64_t step_unit)
    {
      if (copying_.exchange(true, std::memory_order_acquire))
        return;
      if (!copy_live_samples(spare_))
      {
        // Out of memory: keep the copy there is, try again at the next
        // sample past the level.
        mapped_bytes_.store(samples_.bytes() + spare_.bytes(), std::memory_order_relaxed);
        copying_.store(false, std::memory_order_release);
        return;
      }
      // The estimate as the copy ends: samples taken or freed meanwhile
      // are in both or in neither, give or take a few (summing the copy's
      // own weights instead was a third of the copy's cost).
      int64_t bytes = live_bytes_.load(std::memory_order_relaxed);
      int64_t step = bytes / STEP_DIVISOR;
      int64_t min_step = step_unit * MIN_STEP_INTERVALS;
      copy_above_.store(bytes + (step > min_step ? step : min_step), std::memory_order_relaxed);
      {
        LockGuard g(lock_);
        if (bytes > bytes_)
        {
          samples_.swap(spare_);
          bytes_ = bytes;
          time_ns_ = Pal::time_ns();
        }
        mapped_bytes_.store(samples_.bytes() + spare_.bytes(), std::memory_order_relaxed);
      }
      copies_.fetch_add(1, std::memory_order_relaxed);
      copying_.store(false, std::memory_order_release);
    }

  public:
    // A sample standing for `bytes` was taken at `rate` (call with the
    // ProfilerGuard held: a copy allocates).  The least step is counted in
    // sampling intervals in bytes mode, in such samples in the others.
    void added(int64_t bytes, SampleRate rate)
    {
      int64_t now = live_bytes_.fetch_add(bytes, std::memory_order_relaxed) + bytes;
      if (SNMALLOC_UNLIKELY(now > copy_above_.load(std::memory_order_relaxed)))
        copy_live_set(rate.mode == SampleMode::Bytes ? int64_t(rate.interval) : bytes);
    }

    void removed(const SampleRecord* r)
    {
      live_bytes_.fetch_sub(r->bytes, std::memory_order_relaxed);
    }

    struct Copy
    {
      std::vector<SampleView> samples;
      int64_t bytes;
      int64_t time_ns;
    };

    // The copy kept (empty before the first sample), in the heap.
    // Allocates: call with the ProfilerGuard held, outside the profiler's
    // locks.
    Copy copy()
    {
      Copy out{{}, 0, 0};
      for (;;)
      {
        size_t want;
        {
          LockGuard g(lock_);
          want = samples_.size();
          if (out.samples.capacity() >= want)
          {
            out.samples.assign(samples_.begin(), samples_.end());
            out.bytes = bytes_;
            out.time_ns = time_ns_;
            return out;
          }
        }
        out.samples.reserve(want);
      }
    }

    int64_t live_bytes() const
    {
      return live_bytes_.load(std::memory_order_relaxed);
    }

    uint64_t copies() const
    {
      return copies_.load(std::memory_order_relaxed);
    }

    // Memory mapped for the copies.
    size_t own_bytes() const
    {
      return mapped_bytes_.load(std::memory_order_relaxed);
    }

    // fork(): the lock is held across it.  A copy under way in another
    // thread does not continue in the child, so the child may copy again;
    // in the parent it goes on, and owns the spare buffer until it ends.
    void prefork() noexcept
    {
      lock_.hold_for_fork();
      forking_pid_ = ::getpid();
    }

    void postfork() noexcept
    {
      if (::getpid() != forking_pid_)
        copying_.store(false, std::memory_order_relaxed);
      lock_.release_after_fork();
    }
  };

  inline PeakProfile peak_profile;
} // namespace snmalloc::profile
