#pragma once
// Layer profile/config: the keys of SNMALLOC_PROFILE (env_config.h parses
// the variable): the configuration they fill, how each kind of value is
// read, and the table of keys.
//
// A row of the table names a key, the kind of value it takes with the
// field it sets and the range it accepts, and the complaint when the value
// is wrong.  A new key is a field in EnvConfig and a row in KEYS.

#include "../http/http_address.h"
#include "../core/settings.h"
#include "../base/text_view.h"

#include <csignal>
#include <cstring>

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
    // The footprint profile written at exit; empty: none.
    PathText footprint_path;
  };

  constexpr size_t MAX_KEEP = 1024;
  constexpr size_t MAX_DUMP_PERIOD_SECONDS = 366 * 24 * 3600;

  namespace env_detail
  {
    using profile::parse_size;
    using profile::Text;

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

    // ---- the kinds of value ------------------------------------------------
    //
    // Each reads a key's value into its field of EnvConfig; false, with the
    // field unchanged (but for read_signal, which leaves 0), if the value is
    // wrong.  The field and the range are template arguments, so that a row
    // of the table below names them.

    // A decimal number in [min, max].
    template<size_t EnvConfig::*field, size_t min, size_t max>
    SNMALLOC_ONCE_PATH bool read_number(Text value, EnvConfig& cfg)
    {
      return parse_size(value, min, max, cfg.*field);
    }

    // A number of bytes in [min, max], with an optional k, m or g suffix.
    template<size_t EnvConfig::*field, size_t min, size_t max>
    SNMALLOC_ONCE_PATH bool read_bytes(Text value, EnvConfig& cfg)
    {
      return parse_bytes(value, min, max, cfg.*field);
    }

    // 0 or 1.
    template<bool EnvConfig::*field>
    SNMALLOC_ONCE_PATH bool read_flag(Text value, EnvConfig& cfg)
    {
      if (!value.is("0") && !value.is("1"))
        return false;
      cfg.*field = value.is("1");
      return true;
    }

    // A path: not empty, shorter than PATH_CAPACITY.
    template<PathText EnvConfig::*field>
    SNMALLOC_ONCE_PATH bool read_path(Text value, EnvConfig& cfg)
    {
      return value.size != 0 && (cfg.*field).assign(value.data, value.size);
    }

    // bytes, count or sizeclass.
    SNMALLOC_ONCE_PATH inline bool read_mode(Text value, EnvConfig& cfg)
    {
      return parse_mode(value.data, value.size, cfg.mode);
    }

    // A signal by name or number (parse_signal); 0 when it names none.
    SNMALLOC_ONCE_PATH inline bool read_signal(Text value, EnvConfig& cfg)
    {
      cfg.dump_signal = parse_signal(value);
      return cfg.dump_signal != 0;
    }

    // host:port (http_address.h), kept as text.
    SNMALLOC_ONCE_PATH inline bool read_address(Text value, EnvConfig& cfg)
    {
      http::Address parsed;
      if (value.size >= sizeof(cfg.http) || !http::parse_address(value, parsed))
        return false;
      std::memcpy(cfg.http, value.data, value.size);
      cfg.http[value.size] = '\0';
      return true;
    }

    // ---- the keys ------------------------------------------------------------

    struct Key
    {
      const char* name;
      // Reads the value into its field (one of the kinds above).
      bool (*read)(Text value, EnvConfig& cfg);
      // Said, with the value, when `read` rejects it.
      const char* error;
    };

    // The ranges the error texts state.
    static_assert(MAX_DEPTH == 256 && MAX_KEEP == 1024 && MAX_GUARD == 65536);
    static_assert(MAX_DUMP_PERIOD_SECONDS == 31622400 && PATH_CAPACITY == 4096);

    inline constexpr size_t TWO_TO_40 = size_t(1) << 40;
    inline constexpr size_t TWO_TO_50 = size_t(1) << 50;

    // One row a key: its name, the kind of value with the field it sets
    // and the range it accepts, and what is said when the value is wrong.
    // clang-format off
    inline constexpr Key KEYS[] = {
      {"mode", read_mode,
       "mode must be bytes, count or sizeclass, got"},
      {"rate", read_bytes<&EnvConfig::rate, 1, TWO_TO_40>,
       "rate must be a number (k, m, g suffixes) from 1 to 2^40, got"},
      {"depth", read_number<&EnvConfig::depth, 1, MAX_DEPTH>,
       "depth must be a number from 1 to 256, got"},
      {"path", read_path<&EnvConfig::path>,
       "path must be non-empty and shorter than 4096 bytes, got"},
      {"peak_path", read_path<&EnvConfig::peak_path>,
       "peak_path must be non-empty and shorter than 4096 bytes, got"},
      {"footprint_path", read_path<&EnvConfig::footprint_path>,
       "footprint_path must be non-empty and shorter than 4096 bytes, got"},
      {"dump_every", read_bytes<&EnvConfig::dump_every, 1, TWO_TO_50>,
       "dump_every must be a number of bytes (k, m, g suffixes) from 1 to 2^50, got"},
      {"dump_on_growth", read_bytes<&EnvConfig::dump_on_growth, 1, TWO_TO_50>,
       "dump_on_growth must be a number of bytes (k, m, g suffixes) from 1 to 2^50, got"},
      {"dump_period", read_number<&EnvConfig::dump_period_seconds, 1, MAX_DUMP_PERIOD_SECONDS>,
       "dump_period must be a number of seconds from 1 to 31622400, got"},
      {"keep", read_number<&EnvConfig::keep, 1, MAX_KEEP>,
       "keep must be a number of dumps from 1 to 1024, got"},
      {"guard", read_number<&EnvConfig::guard, 0, MAX_GUARD>,
       "guard must be a number of objects from 0 to 65536, got"},
      {"guard_per_second", read_number<&EnvConfig::guard_per_second, 1, TWO_TO_40>,
       "guard_per_second must be a number from 1 to 2^40, got"},
      {"leak_report", read_flag<&EnvConfig::leak_report>,
       "leak_report must be 0 or 1, got"},
      {"dump_at_exit", read_flag<&EnvConfig::dump_at_exit>,
       "dump_at_exit must be 0 or 1, got"},
      {"dump_on_signal", read_signal,
       "dump_on_signal must be a signal name such as SIGUSR2, got"},
      {"http", read_address,
       "http must be host:port with a numeric host (127.0.0.1:6060, :0, [::1]:6060), got"},
      {"http_timeout", read_number<&EnvConfig::http_timeout_seconds, 1, 3600>,
       "http_timeout must be a number of seconds from 1 to 3600, got"},
    };
    // clang-format on

    SNMALLOC_ONCE_PATH inline const Key* find_key(Text name)
    {
      for (const Key& k : KEYS)
      {
        if (name.is(k.name))
          return &k;
      }
      return nullptr;
    }
  } // namespace env_detail
} // namespace snmalloc::profile
