#pragma once
// Layer override: the C function of snmalloc/snmalloc_stats.h, exported by
// every library build, with profiling or without.
#include "../global/global.h"

extern "C" SNMALLOC_EXPORT int snmalloc_stats(struct snmalloc_stats* out)
{
  if (out == nullptr)
    return EINVAL;
  *out = snmalloc::stats();
  return 0;
}
