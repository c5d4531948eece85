#pragma once
// Layer override: the C API of the profiler, exported by libraries built with
// SNMALLOC_PROFILE=ON (empty otherwise).
#include "../global/global.h"

#if SNMALLOC_PROFILE
#  include "../profile/auto_dump.h"
#  include "../profile/c_api.h"

// Environment configuration (SNMALLOC_PROFILE=...) is read as soon as the
// library is initialised, before main().
__attribute__((constructor)) static void snmalloc_profile_configure_from_environment()
{
  snmalloc::profile::AutoDump::instance().configure_from_environment();
}
#endif
