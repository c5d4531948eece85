#pragma once
// Layer override: the allocation labels' C functions (snmalloc_profile.h),
// exported by every shim library, with profiling or without (then they keep
// nothing), so that a labelled program links against either.
#include "../snmalloc_profile.h"
#include "../global/global.h"

extern "C"
{
  SNMALLOC_EXPORT int snmalloc_profile_label_push(const char* key, const char* value)
  {
    return snmalloc::profile::push_label(key, value);
  }

  SNMALLOC_EXPORT int snmalloc_profile_label_pop(void)
  {
    return snmalloc::profile::pop_label();
  }
}
