#pragma once
// Layer profile: the C API for other languages.  Every function returns 0 or
// an errno value.
#include "control.h"

extern "C"
{
  SNMALLOC_EXPORT int snmalloc_profile_start(size_t mean_interval_bytes)
  {
    return snmalloc::profile::start(mean_interval_bytes);
  }

  SNMALLOC_EXPORT int snmalloc_profile_stop(void)
  {
    return snmalloc::profile::stop();
  }

  SNMALLOC_EXPORT int snmalloc_profile_is_active(void)
  {
    return snmalloc::profile::is_active() ? 1 : 0;
  }

  SNMALLOC_EXPORT int snmalloc_profile_dump(const char* path)
  {
    return snmalloc::profile::dump(path).error;
  }

  SNMALLOC_EXPORT int snmalloc_profile_dump_fd(int fd)
  {
    return snmalloc::profile::dump(fd).error;
  }

  SNMALLOC_EXPORT int snmalloc_profile_set_max_depth(size_t depth)
  {
    return snmalloc::profile::set_max_depth(depth);
  }
}
