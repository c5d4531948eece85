#pragma once
// Layer profile, stage "snapshot": a consistent copy of the live samples.
//
// Records are copied under each list's lock into memory reserved before the
// lock is taken (the copy never allocates while a lock is held); all the
// rest, aggregation, symbolisation and encoding, happens outside every lock.
// A sample freed concurrently is either in the copy or not; nothing else
// waits for a copy except a free of a sampled object of the list being
// copied.

#include "event_stream.h"

#include <vector>

namespace snmalloc::profile
{
  // Every live sample.  Call with the ProfilerGuard held.
  inline std::vector<SampleView> snapshot_live_samples()
  {
    std::vector<SampleView> out;
    sample_lists.for_each([&](SampleList& list) {
      for (;;)
      {
        size_t want = out.size() + list.count.load(std::memory_order_relaxed) + 64;
        if (out.capacity() < want)
          out.reserve(want * 2);
        LockGuard g(list.lock);
        if (out.size() + list.count.load(std::memory_order_relaxed) > out.capacity())
          continue; // grew meanwhile; reserve more outside the lock
        for (SampleRecord* r = list.head; r != nullptr; r = r->next)
          out.push_back(view_of(r));
        return;
      }
    });
    return out;
  }
} // namespace snmalloc::profile
