#pragma once
// Layer override: the C functions of snmalloc/snmalloc_stats.h, exported by
// every library build, with profiling or without.
#include "../global/global.h"

extern "C" SNMALLOC_EXPORT int snmalloc_stats(struct snmalloc_stats* out)
{
  if (out == nullptr)
    return EINVAL;
  *out = snmalloc::stats();
  return 0;
}

extern "C" SNMALLOC_EXPORT void
snmalloc_heap_walk(void (*visit)(void* ptr, size_t usable_size, void* arg), void* arg)
{
  if (visit != nullptr)
    snmalloc::detail::heap_walk_with({visit, arg});
}
