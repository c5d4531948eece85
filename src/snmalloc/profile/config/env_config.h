#pragma once
// Layer profile/config: configuration from the environment, for programs that get
// the profiler by LD_PRELOAD and cannot call start() themselves.
//
//   SNMALLOC_PROFILE=mode=bytes,rate=524288,depth=64,path=/tmp/heap.%p.%n.pb.gz,
//                    dump_at_exit=1,dump_on_signal=SIGUSR2,
//                    peak_path=/tmp/peak.%p.pb.gz,footprint_path=/tmp/rss.%p.pb.gz,
//                    dump_every=1g,dump_period=60,
//                    dump_on_growth=256m,keep=10,leak_report=1,
//                    guard=100,guard_per_second=1000,
//                    http=127.0.0.1:6060,http_timeout=10
//
// Sizes (rate, dump_every, dump_on_growth) take a k, m or g suffix (KiB,
// MiB, GiB).  dump_every, dump_period and dump_on_growth write numbered
// profiles to `path` from the helper thread; keep=N removes all but the
// newest N of those automatic ones.  http=host:port serves the profiles
// and statistics over HTTP (override/http_endpoint.h).
//
// mode is bytes, count or sizeclass (sample_mode.h); rate is then bytes, or
// allocations (the suffixes still multiply by 1024), and defaults to the
// mode's default_rate.
//
// Setting the variable at all starts profiling (at 512 KiB unless `rate`
// says otherwise); an empty value means all defaults.  Parsed once at
// start-up without allocating.  Any bad entry is reported in one line on
// stderr and leaves profiling off: the program runs on unharmed.
//
// The keys, the configuration they fill and how each value is read are a
// table in env_keys.h; this file splits the text into key=value items and
// looks each key up there.

#include "env_keys.h"

#include <cstring>
#include <unistd.h>

namespace snmalloc::profile
{
  namespace env_detail
  {
    SNMALLOC_ONCE_PATH inline void complain(const char* what, Text value)
    {
      static const char prefix[] = "snmalloc: SNMALLOC_PROFILE: ";
      static const char suffix[] = "'; profiling stays off\n";
      (void)!::write(2, prefix, sizeof(prefix) - 1);
      (void)!::write(2, what, std::strlen(what));
      (void)!::write(2, " '", 2);
      (void)!::write(2, value.data, value.size);
      (void)!::write(2, suffix, sizeof(suffix) - 1);
    }
  } // namespace env_detail

  // Parse `text` (the variable's value): comma-separated key=value items,
  // applied in order (a key given twice: the last wins), empty items
  // skipped.  false, after one line on stderr, if anything in it is wrong;
  // `cfg` then holds the items before the wrong one.
  SNMALLOC_ONCE_PATH inline bool parse_env_config(const char* text, EnvConfig& cfg)
  {
    using namespace env_detail;
    const char* p = text;
    while (*p != '\0')
    {
      const char* end = p;
      while (*end != '\0' && *end != ',')
        end++;
      Text item{p, size_t(end - p)};
      p = *end == ',' ? end + 1 : end;
      if (item.size == 0)
        continue;
      const char* eq = item.data;
      while (eq != end && *eq != '=')
        eq++;
      if (eq == end)
      {
        complain("expected key=value, got", item);
        return false;
      }
      Text name{item.data, size_t(eq - item.data)};
      Text value{eq + 1, item.size - name.size - 1};
      const Key* key = find_key(name);
      if (key == nullptr)
      {
        complain("unknown key", name);
        return false;
      }
      if (!key->read(value, cfg))
      {
        complain(key->error, value);
        return false;
      }
    }
    return true;
  }

  // Expand %p (pid), %n (sequence number) and %% in `pattern`.
  inline bool expand_dump_path(
    const char* pattern, unsigned long seq, char* out, size_t capacity)
  {
    size_t o = 0;
    auto put_number = [&](unsigned long v) {
      char digits[24];
      size_t n = 0;
      do
      {
        digits[n++] = char('0' + v % 10);
        v /= 10;
      } while (v != 0);
      while (n > 0 && o + 1 < capacity)
        out[o++] = digits[--n];
      return n == 0;
    };
    for (const char* c = pattern; *c != '\0'; c++)
    {
      if (o + 1 >= capacity)
        return false;
      if (c[0] == '%' && (c[1] == 'p' || c[1] == 'n' || c[1] == '%'))
      {
        c++;
        if (*c == '%')
          out[o++] = '%';
        else if (!put_number(*c == 'p' ? (unsigned long)::getpid() : seq))
          return false;
        continue;
      }
      out[o++] = *c;
    }
    out[o] = '\0';
    return true;
  }
} // namespace snmalloc::profile
