#pragma once
// Layer profile/samples, stage "keep": a sample's life.  record_sample
// takes it (the stack, its site, a record placed by the caller, the list
// entry, and what the event stream, the peak profile and the dump
// thresholds count); unlist and lifetime_end end it at its free.  Both run
// on slow paths only.

#include "../core/thread_labels.h"
#include "../stacks/stack_capture.h"
#include "../stacks/stack_table.h"
#include "dump_triggers.h"
#include "event_stream.h"
#include "lifetime_stats.h"
#include "peak_profile.h"
#include "sample_list.h"

#include <sys/syscall.h>
#include <unistd.h>

namespace snmalloc::profile
{
  // The OS thread id, cached per thread: gettid is a system call, and
  // uncached at rate=1 it took a sixth of the time of each sample (perf
  // record).  A fork child's thread has a new id: postfork forgets the
  // cached one.
  inline thread_local uint32_t cached_thread_id = 0;

  inline uint32_t this_thread_id()
  {
    if (SNMALLOC_UNLIKELY(cached_thread_id == 0))
      cached_thread_id = uint32_t(::syscall(SYS_gettid));
    return cached_thread_id;
  }

  // An aligned allocation is served at its size rounded up for the
  // alignment; while it runs, what the program asked for is noted here
  // (Profiler::AskedFor), for its sample's `requested`.
  struct AlignedRequest
  {
    size_t rounded;
    size_t asked;
  };

  inline thread_local AlignedRequest aligned_request = {0, 0};

  // What an allocation served at `size` bytes was asked for.
  inline size_t asked_size(size_t size)
  {
    return aligned_request.rounded == size ? aligned_request.asked : size;
  }

  // Record a sample: stack, stack-table entry, a record from `place(list)`
  // (a pool block with the object, or one for a run that stays), list entry.
  // nullptr when this thread is already inside the profiler or memory is
  // exhausted (a dropped sample, counted); the caller then serves the
  // allocation normally.  `grown_by`: the bytes realloc added in place, when
  // the sample is of an object that grew (StackTable::record).
  template<typename Place>
  SNMALLOC_SLOW_PATH SampleRecord* record_sample(
    SampleList& list, size_t requested, size_t size, SampleRate rate, Place&& place, size_t grown_by = 0)
  {
    if (in_profiler)
      return nullptr;
    ProfilerGuard guard;
    uintptr_t raw[MAX_DEPTH + CAPTURE_CUT];
    auto [frames, depth] = capture_stack(raw, settings.max_depth.load(std::memory_order_relaxed));
    uint32_t labels = thread_labels.current_set();
    if (SNMALLOC_UNLIKELY(labels & LABELS_TRUNCATED))
      label_sets.count_truncated_sample();
    // The site's loads start here; the clock read covers them.
    StackTable::SiteKey key = stack_table.key(frames, depth, size, labels);
    int64_t birth_ns = Pal::precise_monotonic_ns();
    StackTable::Recorded site = stack_table.record(key, frames, depth, size, requested, rate, labels, grown_by);
    SampleRecord* r = site.id == StackTable::NO_ID ? nullptr : place(list);
    if (r == nullptr)
    {
      settings.samples_dropped.fetch_add(1, std::memory_order_relaxed);
      return nullptr;
    }
    int64_t bytes = int64_t(site.weight * double(size));
    r->requested_size = requested;
    r->allocated_size = size;
    r->interval = rate.interval;
    r->bytes = bytes;
    r->mode = rate.mode;
    r->birth_ns = birth_ns;
    r->site_id = site.id;
    r->thread_id = this_thread_id();
    if (!list.registered)
    {
      list.registered = true;
      sample_lists.add(&list);
    }
    list.insert(r);
    emit_event(EventKind::Alloc, r);
    peak_profile.added(bytes, rate);
    dump_triggers.sampled(bytes);
    return r;
  }

  // A sampled object's end, as at a free: out of its list, the event told.
  // With `keep_record`, the record may stay with the list as a spare
  // (SampleList::remove), and whether it did is returned: then it is no
  // longer the caller's.
  inline bool unlist(SampleRecord* r, bool keep_record = false)
  {
    emit_event(EventKind::Free, r);
    peak_profile.removed(r);
    return r->list->remove(r, keep_record);
  }

  // A sampled object is freed: what its site counts, its lifetime (a
  // second clock read, the only one at a free) and whether another thread
  // freed it.  Its weight is what its live bytes were computed from,
  // recovered by a division rather than computed again (an expm1 in bytes
  // mode).
  inline LifetimeTable::Freed lifetime_end(const SampleRecord* r)
  {
    int64_t lifetime = Pal::precise_monotonic_ns() - r->birth_ns;
    lifetime = lifetime < 0 ? 0 : lifetime;
    return {
      r->site_id,
      r->thread_id != this_thread_id(),
      lifetime,
      double(r->bytes) / double(r->allocated_size),
      lifetime_bucket(lifetime)};
  }
} // namespace snmalloc::profile
