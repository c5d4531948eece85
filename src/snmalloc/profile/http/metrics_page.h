#pragma once
// Layer profile/http: the /metrics page, the allocator's
// statistics (snmalloc_stats.h, read by the caller: this layer cannot call
// snmalloc::stats()) and the profiler's own counters in the Prometheus
// text format, every name prefixed snmalloc_.  Series per sizeclass carry
// the label object_size (bytes per object of the class).

#include "../../snmalloc_stats.h"
#include "../control.h"
#include "prometheus_text.h"

namespace snmalloc::profile::http
{
  inline void write_allocator_metrics(const struct ::snmalloc_stats& s, PrometheusText& m)
  {
    m.single(
      "snmalloc_live_bytes",
      "gauge",
      "Bytes of live objects (small ones at their sizeclass size, large runs at theirs); "
      "an upper bound, counted at slab and run events, with objects cached in threads' free lists",
      s.live_bytes);
    m.single(
      "snmalloc_peak_live_bytes", "gauge", "Highest snmalloc_live_bytes since the process started",
      s.peak_live_bytes);
    m.single("snmalloc_small_live_bytes", "gauge", "Bytes of live objects of 64 KiB or less", s.small_live_bytes);
    m.single("snmalloc_large_live_bytes", "gauge", "Bytes of live large runs (objects above 64 KiB)", s.large_live_bytes);
    m.single("snmalloc_large_runs", "gauge", "Live large runs", s.large_runs);
    m.single("snmalloc_slab_bytes", "gauge", "Bytes of all slabs, their free objects included", s.slab_bytes);
    m.single(
      "snmalloc_resident_bytes", "gauge",
      "Chunks handed out plus freed chunks not yet returned to the OS: an upper bound of the heap's resident memory",
      s.resident_bytes);
    m.single("snmalloc_meta_bytes", "gauge", "Bytes of slab descriptors and allocators", s.meta_bytes);
    m.single(
      "snmalloc_profiler_bytes", "gauge", "Memory the heap profiler keeps for itself", s.profiler_bytes);

    size_t classes = s.sizeclass_count < SNMALLOC_STATS_SIZECLASSES ? s.sizeclass_count :
                                                                       SNMALLOC_STATS_SIZECLASSES;
    struct Series
    {
      const char* name;
      const char* help;
      uint64_t snmalloc_sizeclass_stats::*field;
    };
    static constexpr Series series[] = {
      {"snmalloc_sizeclass_live_objects", "Live objects of a sizeclass (an upper bound, as snmalloc_live_bytes)",
       &snmalloc_sizeclass_stats::live_objects},
      {"snmalloc_sizeclass_slabs", "Slabs of a sizeclass", &snmalloc_sizeclass_stats::slabs},
      {"snmalloc_sizeclass_slab_bytes", "Bytes of the slabs of a sizeclass",
       &snmalloc_sizeclass_stats::slab_bytes},
    };
    for (const Series& f : series)
    {
      m.family(f.name, "gauge", f.help);
      for (size_t i = 0; i < classes; i++)
      {
        char size[24];
        std::snprintf(size, sizeof(size), "%llu", static_cast<unsigned long long>(s.sizeclasses[i].object_size));
        m.sample(f.name, "object_size", size, s.sizeclasses[i].*f.field);
      }
    }
  }

  inline void write_profiler_metrics(PrometheusText& m)
  {
    int64_t estimate = peak_profile.live_bytes();
    m.family(
      "snmalloc_profile_sampling_rate", "gauge",
      "Mean sampling interval of the heap profiler: bytes in mode bytes, allocations in modes count "
      "and sizeclass (0: not sampling)");
    m.sample("snmalloc_profile_sampling_rate", "mode", mode_name(mode()), interval());
    m.single("snmalloc_profile_samples_total", "counter", "Allocations sampled", samples_taken());
    m.single("snmalloc_profile_live_samples", "gauge", "Sampled objects still live", live_samples());
    m.single(
      "snmalloc_profile_samples_dropped_total", "counter",
      "Samples not taken because memory for their record ran out", samples_dropped());
    m.single(
      "snmalloc_profile_live_bytes_estimate", "gauge",
      "Live heap estimated from the samples (unbiased; what inuse_space sums to)",
      estimate > 0 ? uint64_t(estimate) : 0);
    m.single(
      "snmalloc_profile_dumps_total", "counter", "Profiles written by dumps or served over HTTP",
      dumps_written());
    m.single(
      "snmalloc_profile_dump_failures_total", "counter", "Profiles that could not be written or served",
      dump_failures());
    m.single(
      "snmalloc_profile_peak_copies_total", "counter", "Copies of the live samples taken at new peaks",
      peak_profile.copies());
  }
} // namespace snmalloc::profile::http
