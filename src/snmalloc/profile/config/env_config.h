#pragma once
// Layer profile/config: configuration from the environment, for programs that get
// the profiler by LD_PRELOAD and cannot call start() themselves.
//
//   SNMALLOC_PROFILE=mode=bytes,rate=524288,depth=64,path=/tmp/heap.%p.%n.pb.gz,
//                    dump_at_exit=1,dump_on_signal=SIGUSR2,
//                    peak_path=/tmp/peak.%p.pb.gz,dump_every=1g,dump_period=60,
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

#include "../http/http_address.h"
#include "../core/settings.h"
#include "../base/text_view.h"

#include <csignal>
#include <cstring>
#include <unistd.h>

namespace snmalloc::profile
{
  constexpr size_t PATH_CAPACITY = 4096;

  // A dump path of up to PATH_CAPACITY - 1 bytes.  Copies and assignments
  // write only the bytes that differ, with loops rather than libc calls:
  // configurations are copied at start-up, where a page written is a page
  // fault and a first libc call a lazy binding, both of which a short
  // process notices.  Built by the compiler (constexpr), so that a static
  // configuration costs no code at start-up.
  class PathText
  {
    char text_[PATH_CAPACITY] = {};

  public:
    constexpr PathText(const char* text = "")
    {
      size_t i = 0;
      for (; text[i] != '\0' && i + 1 < PATH_CAPACITY; i++)
        text_[i] = text[i];
      text_[i] = '\0';
    }

    constexpr PathText(const PathText& other)
    {
      *this = other;
    }

    constexpr PathText& operator=(const PathText& other)
    {
      size_t i = 0;
      for (; other.text_[i] != '\0'; i++)
      {
        if (text_[i] != other.text_[i])
          text_[i] = other.text_[i];
      }
      if (text_[i] != '\0')
        text_[i] = '\0';
      return *this;
    }

    // false, and unchanged, when `size` bytes do not fit.
    bool assign(const char* text, size_t size)
    {
      if (size >= PATH_CAPACITY)
        return false;
      for (size_t i = 0; i < size; i++)
        text_[i] = text[i];
      text_[size] = '\0';
      return true;
    }

    const char* c_str() const
    {
      return text_;
    }

    bool empty() const
    {
      return text_[0] == '\0';
    }
  };

  // The scalars first and the two paths last, so that writing a copy
  // touches the pages of the paths' texts and no more.
  struct EnvConfig
  {
    SampleMode mode = SampleMode::Bytes;
    size_t rate = 0; // 0: default_rate(mode)
    size_t depth = DEFAULT_DEPTH;
    bool dump_at_exit = false;
    int dump_signal = 0;
    // Automatic dumps (0: off) and how many of them to keep (0: all).
    size_t dump_every = 0;
    size_t dump_period_seconds = 0;
    size_t dump_on_growth = 0;
    size_t keep = 0;
    // The leak report on stderr at exit.
    bool leak_report = false;
    // Guarded sampling: objects guarded at a time (0: off), new ones a second.
    size_t guard = 0;
    size_t guard_per_second = DEFAULT_GUARD_PER_SECOND;
    // The HTTP endpoint's address (http_address.h); empty: none.  Its
    // timeout for slow clients.
    char http[http::ADDRESS_CAPACITY] = "";
    size_t http_timeout_seconds = 10;
    PathText path{"snmalloc-heap.%p.%n.pb.gz"};
    // The peak-heap profile written at exit; empty: none.
    PathText peak_path;
  };

  constexpr size_t MAX_KEEP = 1024;
  constexpr size_t MAX_DUMP_PERIOD_SECONDS = 366 * 24 * 3600;

  namespace env_detail
  {
    using profile::parse_size;
    using profile::Text;

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

    // A number of bytes, with an optional k, m or g suffix (powers of 1024).
    SNMALLOC_ONCE_PATH inline bool parse_bytes(Text t, size_t min, size_t max, size_t& out)
    {
      size_t shift = 0;
      if (t.size > 0)
      {
        switch (t.data[t.size - 1])
        {
          case 'k':
          case 'K':
            shift = 10;
            break;
          case 'm':
          case 'M':
            shift = 20;
            break;
          case 'g':
          case 'G':
            shift = 30;
            break;
          default:
            break;
        }
      }
      size_t v = 0;
      if (!parse_size({t.data, t.size - (shift != 0 ? 1 : 0)}, 0, max >> shift, v))
        return false;
      v <<= shift;
      if (v < min)
        return false;
      out = v;
      return true;
    }

    inline bool copy_path(Text t, PathText& out)
    {
      return t.size != 0 && out.assign(t.data, t.size);
    }

    SNMALLOC_ONCE_PATH inline int parse_signal(Text t)
    {
      static const struct
      {
        const char* name;
        int number;
      } names[] = {
        {"SIGUSR1", SIGUSR1},
        {"SIGUSR2", SIGUSR2},
        {"SIGHUP", SIGHUP},
        {"SIGPROF", SIGPROF},
        {"SIGURG", SIGURG},
        {"SIGWINCH", SIGWINCH},
      };
      for (const auto& n : names)
      {
        // "SIGUSR2" and "USR2" both name it.
        if (t.is(n.name) || t.is(n.name + 3))
          return n.number;
      }
      size_t number = 0;
      if (parse_size(t, 1, size_t(SIGRTMAX), number))
        return int(number);
      return 0;
    }
  } // namespace env_detail

  // Parse `text` (the variable's value).  false, after one line on stderr,
  // if anything in it is wrong.
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
      Text key{item.data, size_t(eq - item.data)};
      Text value{eq + 1, item.size - key.size - 1};
      if (key.is("mode"))
      {
        if (!parse_mode(value.data, value.size, cfg.mode))
        {
          complain("mode must be bytes, count or sizeclass, got", value);
          return false;
        }
      }
      else if (key.is("rate"))
      {
        if (!parse_bytes(value, 1, size_t(1) << 40, cfg.rate))
        {
          complain("rate must be a number (k, m, g suffixes) from 1 to 2^40, got", value);
          return false;
        }
      }
      else if (key.is("depth"))
      {
        if (!parse_size(value, 1, MAX_DEPTH, cfg.depth))
        {
          complain("depth must be a number from 1 to 256, got", value);
          return false;
        }
      }
      else if (key.is("path"))
      {
        if (!copy_path(value, cfg.path))
        {
          complain("path must be non-empty and shorter than 4096 bytes, got", value);
          return false;
        }
      }
      else if (key.is("peak_path"))
      {
        if (!copy_path(value, cfg.peak_path))
        {
          complain("peak_path must be non-empty and shorter than 4096 bytes, got", value);
          return false;
        }
      }
      else if (key.is("dump_every"))
      {
        if (!parse_bytes(value, 1, size_t(1) << 50, cfg.dump_every))
        {
          complain("dump_every must be a number of bytes (k, m, g suffixes) from 1 to 2^50, got", value);
          return false;
        }
      }
      else if (key.is("dump_on_growth"))
      {
        if (!parse_bytes(value, 1, size_t(1) << 50, cfg.dump_on_growth))
        {
          complain("dump_on_growth must be a number of bytes (k, m, g suffixes) from 1 to 2^50, got", value);
          return false;
        }
      }
      else if (key.is("dump_period"))
      {
        if (!parse_size(value, 1, MAX_DUMP_PERIOD_SECONDS, cfg.dump_period_seconds))
        {
          complain("dump_period must be a number of seconds from 1 to 31622400, got", value);
          return false;
        }
      }
      else if (key.is("keep"))
      {
        if (!parse_size(value, 1, MAX_KEEP, cfg.keep))
        {
          complain("keep must be a number of dumps from 1 to 1024, got", value);
          return false;
        }
      }
      else if (key.is("guard"))
      {
        if (!parse_size(value, 0, MAX_GUARD, cfg.guard))
        {
          complain("guard must be a number of objects from 0 to 65536, got", value);
          return false;
        }
      }
      else if (key.is("guard_per_second"))
      {
        if (!parse_size(value, 1, size_t(1) << 40, cfg.guard_per_second))
        {
          complain("guard_per_second must be a number from 1 to 2^40, got", value);
          return false;
        }
      }
      else if (key.is("leak_report"))
      {
        if (!value.is("0") && !value.is("1"))
        {
          complain("leak_report must be 0 or 1, got", value);
          return false;
        }
        cfg.leak_report = value.is("1");
      }
      else if (key.is("dump_at_exit"))
      {
        if (!value.is("0") && !value.is("1"))
        {
          complain("dump_at_exit must be 0 or 1, got", value);
          return false;
        }
        cfg.dump_at_exit = value.is("1");
      }
      else if (key.is("dump_on_signal"))
      {
        cfg.dump_signal = parse_signal(value);
        if (cfg.dump_signal == 0)
        {
          complain("dump_on_signal must be a signal name such as SIGUSR2, got", value);
          return false;
        }
      }
      else if (key.is("http"))
      {
        http::Address address;
        if (value.size >= sizeof(cfg.http) || !http::parse_address(value, address))
        {
          complain("http must be host:port with a numeric host (127.0.0.1:6060, :0, [::1]:6060), got", value);
          return false;
        }
        std::memcpy(cfg.http, value.data, value.size);
        cfg.http[value.size] = '\0';
      }
      else if (key.is("http_timeout"))
      {
        if (!parse_size(value, 1, 3600, cfg.http_timeout_seconds))
        {
          complain("http_timeout must be a number of seconds from 1 to 3600, got", value);
          return false;
        }
      }
      else
      {
        complain("unknown key", key);
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
