#pragma once
// Layer profile/http: what each path serves, the paths Go's
// net/http/pprof made standard (so `go tool pprof URL`, Pyroscope and Parca
// find them) and Prometheus's /metrics.
//
//   /debug/pprof/heap     the live heap, gzipped pprof: the bytes dump() writes
//   /debug/pprof/allocs   the same profile, alloc_space its default type
//   /debug/pprof/peak     the peak-heap profile (dump_peak)
//   /debug/pprof/lifetimes  the lifetime profile (dump_lifetimes)
//   /debug/pprof/footprint  the footprint profile (dump_footprint)
//       heap and allocs take ?seconds=N (1 .. MAX_DELTA_SECONDS): the
//       difference of two profiles N seconds apart (profile_delta.h);
//       lifetimes too: the objects freed in those N seconds, and no live
//       ones (lifetime_profile.h)
//   /debug/pprof/         an HTML index of the above
//   /metrics              metrics_page.h
//
// GET and HEAD only (405 otherwise); any other path 404.  The handler runs
// on the server thread, whose allocations are never sampled.

#include "http_dispatch.h"
#include "metrics_page.h"
#include "../pprof/profile_delta.h"

namespace snmalloc::profile::http
{
  constexpr uint64_t MAX_DELTA_SECONDS = 3600;

  // Reads the allocator's statistics; set by the layer that can
  // (override/http_endpoint.h), nullptr: /metrics has the profiler's only.
  inline void (*read_statistics)(struct ::snmalloc_stats*) = nullptr;

  namespace routes_detail
  {
    inline void bad_request(Response& r, const char* why)
    {
      r.status = 400;
      r.body = why;
      r.body += '\n';
    }

    // An encoded profile into r, gzipped, counted as a dump.
    inline void send_encoded(Response& r, const char* name, const std::vector<uint8_t>& bytes)
    {
      std::string body;
      int error = gzip_to(bytes.data(), bytes.size(), [&](const uint8_t* p, size_t n) {
        try
        {
          body.append(reinterpret_cast<const char*>(p), n);
          return 0;
        }
        catch (const std::bad_alloc&)
        {
          return ENOMEM;
        }
      });
      if (detail::count_dump(error) != 0)
      {
        r.status = 500;
        r.body = std::strerror(error);
        r.body += '\n';
        return;
      }
      r.content_type = "application/octet-stream";
      r.headers = std::string("Content-Disposition: attachment; filename=\"") + name + "\"\r\n";
      r.body = std::move(body);
    }

    // A profile of `rows` into r as gzipped pprof, counted as a dump.
    inline void send_profile(
      Response& r,
      const char* name,
      const std::vector<ProfileBucket>& rows,
      int64_t when,
      const char* default_sample_type,
      int64_t duration = -1)
    {
      send_encoded(r, name, detail::encode_rows(rows, when, default_sample_type, duration));
    }

    inline std::vector<ProfileBucket> live_rows()
    {
      return aggregate(snapshot_live_samples()).rows;
    }

    // Reads seconds=N into `seconds`; false (and r a 400) if it is there
    // but not a number of seconds allowed.  `seconds` stays 0 without it.
    inline bool window_seconds(const Request& q, Response& r, size_t& seconds)
    {
      Text value;
      if (!query_value(q.query, "seconds", value))
        return true;
      if (parse_size(value, 1, MAX_DELTA_SECONDS, seconds))
        return true;
      bad_request(r, "seconds must be a whole number of seconds from 1 to 3600");
      return false;
    }

    // Finishes r `seconds` from now by finish(out, length), the window's
    // length by the monotonic clock: a step of the wall clock inside it is
    // no part of it.
    template<typename Finish>
    inline void finish_after(Response& r, size_t seconds, Finish finish)
    {
      int64_t since = Pal::precise_monotonic_ns();
      r.due_ns = Pal::monotonic_ns() + int64_t(seconds) * 1000000000;
      r.finish = [since, finish = std::move(finish)](Response& out) {
        finish(out, Pal::precise_monotonic_ns() - since);
      };
    }

    // heap or allocs, now or as the difference over ?seconds=N.
    inline void heap_profile(
      const Request& q, Response& r, const char* name, const char* default_sample_type)
    {
      size_t seconds = 0;
      if (!window_seconds(q, r, seconds))
        return;
      if (seconds == 0)
        return send_profile(r, name, live_rows(), Pal::time_ns(), default_sample_type);
      finish_after(
        r,
        seconds,
        [before = live_rows(), name, default_sample_type](Response& out, int64_t length) {
          send_profile(
            out, name, profile_delta(before, live_rows()), Pal::time_ns(), default_sample_type, length);
        });
    }

    // The lifetime profile now, or the frees of the next ?seconds=N.
    inline void lifetimes(const Request& q, Response& r)
    {
      size_t seconds = 0;
      if (!window_seconds(q, r, seconds))
        return;
      if (seconds == 0)
        return send_encoded(r, "lifetimes", detail::encode_lifetime_profile());
      finish_after(r, seconds, [before = freed_lifetime_rows()](Response& out, int64_t length) {
        send_encoded(
          out,
          "lifetimes",
          detail::encode_lifetime_rows(
            lifetime_delta(before, freed_lifetime_rows()), Pal::time_ns(), length));
      });
    }

    inline void peak(const Request& q, Response& r)
    {
      Text value;
      if (query_value(q.query, "seconds", value))
        return bad_request(r, "the peak profile has no difference over time: drop ?seconds=");
      PeakProfile::Copy copy = peak_profile.copy();
      send_profile(
        r,
        "peak",
        aggregate(copy.samples).rows,
        copy.time_ns != 0 ? copy.time_ns : Pal::time_ns(),
        "inuse_space");
    }

    inline void index(Response& r)
    {
      r.content_type = "text/html; charset=utf-8";
      r.body =
        "<!DOCTYPE html>\n<html><head><title>snmalloc profiles</title></head><body>\n"
        "<h1>snmalloc heap profiles</h1>\n<ul>\n"
        "<li><a href=\"heap\">heap</a>: live objects now (pprof, inuse_space; "
        "<code>?seconds=N</code>: the change over N seconds)</li>\n"
        "<li><a href=\"allocs\">allocs</a>: the same profile, alloc_space by default "
        "(everything sampled since the start)</li>\n"
        "<li><a href=\"peak\">peak</a>: live objects when the heap was highest</li>\n"
        "<li><a href=\"lifetimes\">lifetimes</a>: how long objects lived, per site "
        "(pprof, lifetime; <code>?seconds=N</code>: the frees of N seconds)</li>\n"
        "<li><a href=\"footprint\">footprint</a>: every resident byte of the process "
        "(pprof, resident_space and slab_waste_space)</li>\n"
        "<li><a href=\"/metrics\">/metrics</a>: allocator statistics (Prometheus)</li>\n"
        "</ul>\n<p><code>go tool pprof http://HOST:PORT/debug/pprof/heap</code></p>\n"
        "</body></html>\n";
    }

    inline void metrics(Response& r)
    {
      r.content_type = "text/plain; version=0.0.4; charset=utf-8";
      PrometheusText m(r.body);
      if (read_statistics != nullptr)
      {
        struct ::snmalloc_stats s{};
        read_statistics(&s);
        write_allocator_metrics(s, m);
      }
      write_profiler_metrics(m);
    }
  } // namespace routes_detail

  inline void serve(const Request& q, Response& r)
  {
    using namespace routes_detail;
    enum class Page
    {
      Heap,
      Allocs,
      Peak,
      Lifetimes,
      Footprint,
      Index,
      Metrics,
    } page;
    if (q.path.is("/debug/pprof/heap"))
      page = Page::Heap;
    else if (q.path.is("/debug/pprof/allocs"))
      page = Page::Allocs;
    else if (q.path.is("/debug/pprof/peak"))
      page = Page::Peak;
    else if (q.path.is("/debug/pprof/lifetimes"))
      page = Page::Lifetimes;
    else if (q.path.is("/debug/pprof/footprint"))
      page = Page::Footprint;
    else if (q.path.is("/debug/pprof/") || q.path.is("/debug/pprof"))
      page = Page::Index;
    else if (q.path.is("/metrics"))
      page = Page::Metrics;
    else
    {
      r.status = 404;
      r.body = "not found; see /debug/pprof/\n";
      return;
    }
    if (!q.method.is("GET") && !q.method.is("HEAD"))
    {
      r.status = 405;
      r.headers = "Allow: GET, HEAD\r\n";
      r.body = "GET or HEAD only\n";
      return;
    }
    switch (page)
    {
      case Page::Heap:
        return heap_profile(q, r, "heap", "inuse_space");
      case Page::Allocs:
        return heap_profile(q, r, "allocs", "alloc_space");
      case Page::Peak:
        return peak(q, r);
      case Page::Lifetimes:
        return lifetimes(q, r);
      case Page::Footprint:
        return send_encoded(r, "footprint", detail::encode_footprint_profile());
      case Page::Index:
        return index(r);
      case Page::Metrics:
        return metrics(r);
    }
  }
} // namespace snmalloc::profile::http
