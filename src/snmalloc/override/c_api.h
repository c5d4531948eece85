#pragma once
// Layer override: the definitions of the C API declared in
// snmalloc/snmalloc_profile.h.
#include "../snmalloc_profile.h"
#include "../profile/profile.h"
#include "auto_dump.h"

namespace snmalloc::profile::c_api_detail
{
  inline void fill(const SampleView& v, snmalloc_profile_sample* out)
  {
    const StackEntry* stack = stack_table.stack_of(v.site_id);
    out->address = v.address;
    out->requested_size = v.requested_size;
    out->allocated_size = v.allocated_size;
    out->weight = sample_weight(v.mode, v.allocated_size, v.interval);
    out->interval = v.interval;
    out->thread_id = v.thread_id;
    out->time_ns = v.time_ns;
    out->depth = stack != nullptr ? stack->depth : 0;
    out->frames = stack != nullptr ? stack->frames : nullptr;
    out->mode = uint32_t(v.mode);
  }
} // namespace snmalloc::profile::c_api_detail

struct snmalloc_profile_snapshot
{
  std::vector<snmalloc::profile::SampleView> samples;
};

extern "C"
{
  SNMALLOC_EXPORT int snmalloc_profile_start(size_t mean_interval_bytes)
  {
    return snmalloc::profile::start(mean_interval_bytes);
  }

  SNMALLOC_EXPORT int snmalloc_profile_start_mode(int mode, size_t rate)
  {
    return snmalloc::profile::start(snmalloc::profile::SampleMode(mode), rate);
  }

  SNMALLOC_EXPORT int snmalloc_profile_mode(void)
  {
    return int(snmalloc::profile::mode());
  }

  SNMALLOC_EXPORT int snmalloc_profile_set_guard(size_t limit, size_t per_second)
  {
    return snmalloc::profile::set_guard(
      limit, per_second != 0 ? per_second : snmalloc::profile::DEFAULT_GUARD_PER_SECOND);
  }

  SNMALLOC_EXPORT uint64_t snmalloc_profile_guarded_total(void)
  {
    return snmalloc::profile::guarded_total();
  }

  SNMALLOC_EXPORT int snmalloc_profile_stop(void)
  {
    return snmalloc::profile::stop();
  }

  SNMALLOC_EXPORT int snmalloc_profile_is_active(void)
  {
    return snmalloc::profile::is_active() ? 1 : 0;
  }

  SNMALLOC_EXPORT uint64_t snmalloc_profile_samples_dropped(void)
  {
    return snmalloc::profile::samples_dropped();
  }

  SNMALLOC_EXPORT int snmalloc_profile_set_max_depth(size_t depth)
  {
    return snmalloc::profile::set_max_depth(depth);
  }

  SNMALLOC_EXPORT int snmalloc_profile_dump(const char* path)
  {
    return snmalloc::profile::dump(path).error;
  }

  SNMALLOC_EXPORT int snmalloc_profile_dump_fd(int fd)
  {
    return snmalloc::profile::dump(fd).error;
  }

  SNMALLOC_EXPORT int snmalloc_profile_dump_peak(const char* path)
  {
    return snmalloc::profile::dump_peak(path).error;
  }

  SNMALLOC_EXPORT int snmalloc_profile_dump_peak_fd(int fd)
  {
    return snmalloc::profile::dump_peak(fd).error;
  }

  SNMALLOC_EXPORT int snmalloc_profile_dump_footprint(const char* path)
  {
    return snmalloc::profile::dump_footprint(path).error;
  }

  SNMALLOC_EXPORT int snmalloc_profile_dump_footprint_fd(int fd)
  {
    return snmalloc::profile::dump_footprint(fd).error;
  }

  SNMALLOC_EXPORT int snmalloc_profile_dump_lifetimes(const char* path)
  {
    return snmalloc::profile::dump_lifetimes(path).error;
  }

  SNMALLOC_EXPORT int snmalloc_profile_dump_lifetimes_fd(int fd)
  {
    return snmalloc::profile::dump_lifetimes(fd).error;
  }

  SNMALLOC_EXPORT int snmalloc_profile_configure(const char* settings)
  {
    return snmalloc::profile::configure(settings);
  }

  SNMALLOC_EXPORT int snmalloc_profile_http_start(const char* address, uint16_t* port)
  {
    return snmalloc::profile::http_start(address, port);
  }

  SNMALLOC_EXPORT int snmalloc_profile_http_stop(void)
  {
    return snmalloc::profile::http_stop();
  }

  SNMALLOC_EXPORT uint16_t snmalloc_profile_http_port(void)
  {
    return snmalloc::profile::http_port();
  }

  SNMALLOC_EXPORT int snmalloc_profile_snapshot_take(snmalloc_profile_snapshot** out)
  {
    using namespace snmalloc::profile;
    if (out == nullptr)
      return EINVAL;
    ProfilerGuard guard;
    try
    {
      *out = new snmalloc_profile_snapshot{snapshot_live_samples()};
      return 0;
    }
    catch (const std::bad_alloc&)
    {
      return ENOMEM;
    }
  }

  SNMALLOC_EXPORT size_t snmalloc_profile_snapshot_count(const snmalloc_profile_snapshot* s)
  {
    return s != nullptr ? s->samples.size() : 0;
  }

  SNMALLOC_EXPORT int snmalloc_profile_snapshot_get(
    const snmalloc_profile_snapshot* s, size_t i, snmalloc_profile_sample* out)
  {
    if (s == nullptr || out == nullptr)
      return EINVAL;
    if (i >= s->samples.size())
      return ERANGE;
    snmalloc::profile::c_api_detail::fill(s->samples[i], out);
    return 0;
  }

  SNMALLOC_EXPORT void snmalloc_profile_snapshot_free(snmalloc_profile_snapshot* s)
  {
    delete s;
  }

  SNMALLOC_EXPORT int snmalloc_profile_events_start(size_t capacity)
  {
    using namespace snmalloc::profile;
    if (capacity == 0 || capacity > (size_t(1) << 30))
      return EINVAL;
    snmalloc::LockGuard g(event_ring_lock);
    EventRing* ring = EventRing::create(capacity);
    if (ring == nullptr)
      return ENOMEM;
    event_ring.store(ring, std::memory_order_release);
    return 0;
  }

  SNMALLOC_EXPORT size_t snmalloc_profile_events_read(
    snmalloc_profile_event* out, size_t max, uint64_t* dropped_total)
  {
    using namespace snmalloc::profile;
    snmalloc::LockGuard g(event_ring_lock);
    EventRing* ring = event_ring.load(std::memory_order_acquire);
    if (ring == nullptr || out == nullptr)
    {
      if (dropped_total != nullptr)
        *dropped_total = ring != nullptr ? ring->dropped() : 0;
      return 0;
    }
    Event batch[64];
    size_t n = 0;
    while (n < max)
    {
      size_t want = max - n < 64 ? max - n : 64;
      size_t got = ring->drain(batch, want);
      for (size_t i = 0; i < got; i++)
      {
        out[n + i].kind = uint32_t(batch[i].kind);
        c_api_detail::fill(batch[i].sample, &out[n + i].sample);
      }
      n += got;
      if (got < want)
        break;
    }
    if (dropped_total != nullptr)
      *dropped_total = ring->dropped();
    return n;
  }

  SNMALLOC_EXPORT int snmalloc_profile_events_stop(void)
  {
    using namespace snmalloc::profile;
    snmalloc::LockGuard g(event_ring_lock);
    event_ring.store(nullptr, std::memory_order_release);
    return 0;
  }
}
