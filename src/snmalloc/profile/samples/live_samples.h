#pragma once
// Layer profile/samples, stage "snapshot": a consistent copy of the live samples.
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
  // Every live sample into `out` (emptied first), which has size(),
  // capacity(), push_back() and grow(n) (false: no memory).  false if
  // memory for the copy ran out.  Call with the ProfilerGuard held.
  template<typename Out>
  bool copy_live_samples(Out& out)
  {
    out.clear();
    bool ok = true;
    sample_lists.for_each([&](SampleList& list) {
      while (ok)
      {
        size_t want = out.size() + list.count.load(std::memory_order_relaxed) + 64;
        if (out.capacity() < want && !out.grow(want * 2))
        {
          ok = false;
          return;
        }
        LockGuard g(list.lock);
        if (out.size() + list.count.load(std::memory_order_relaxed) > out.capacity())
          continue; // grew meanwhile; reserve more outside the lock
        for (SampleRecord* r = list.head; r != nullptr; r = r->next)
          out.push_back(view_of(r));
        return;
      }
    });
    return ok;
  }

  // Every live sample, in a vector (std::bad_alloc if memory runs out).
  // Call with the ProfilerGuard held.
  inline std::vector<SampleView> snapshot_live_samples()
  {
    struct Growable
    {
      std::vector<SampleView> v;
      size_t size() const
      {
        return v.size();
      }
      size_t capacity() const
      {
        return v.capacity();
      }
      void clear()
      {
        v.clear();
      }
      bool grow(size_t n)
      {
        v.reserve(n);
        return true;
      }
      void push_back(const SampleView& s)
      {
        v.push_back(s);
      }
    } out;
    copy_live_samples(out);
    return std::move(out.v);
  }
} // namespace snmalloc::profile
