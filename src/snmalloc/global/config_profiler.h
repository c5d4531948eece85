#pragma once
// Layer global: choose the profiler policy.  The one `#if` on the profiling
// option outside ds_core/config.h: with it off, nothing includes profile/.

#include "../mem/mem.h"

#if SNMALLOC_PROFILE
#  include "../profile/profile.h"
namespace snmalloc
{
  using Profiler = profile::Profiler;
}
#else
namespace snmalloc
{
  using Profiler = NoProfiler;
}
#endif

namespace snmalloc
{
  using Alloc = CoreAlloc<Profiler>;
  using Local = Alloc::Local;
}
