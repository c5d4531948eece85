#pragma once
// Layer profile/base: a view of bytes in someone else's buffer and a decimal
// number read from one, for the parsers of text from outside the process
// (SNMALLOC_PROFILE in env_config.h, HTTP requests in http_request.h),
// which must not allocate.

#include <cstddef>

namespace snmalloc::profile
{
  struct Text
  {
    const char* data = nullptr;
    size_t size = 0;

    // A loop, not strlen and memcmp: the configuration is parsed at
    // start-up, where each first call of a libc function is a lazy binding
    // (about 900 instructions).
    bool is(const char* word) const
    {
      for (size_t i = 0; i < size; i++)
      {
        if (word[i] == '\0' || word[i] != data[i])
          return false;
      }
      return word[size] == '\0';
    }
  };

  // A decimal number of at most 19 digits in [min, max]; false otherwise.
  inline bool parse_size(Text t, size_t min, size_t max, size_t& out)
  {
    if (t.size == 0 || t.size > 19)
      return false;
    size_t v = 0;
    for (size_t i = 0; i < t.size; i++)
    {
      if (t.data[i] < '0' || t.data[i] > '9')
        return false;
      v = v * 10 + size_t(t.data[i] - '0');
    }
    if (v < min || v > max)
      return false;
    out = v;
    return true;
  }
} // namespace snmalloc::profile
