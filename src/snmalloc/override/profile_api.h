#pragma once
// Layer override: the C API of the profiler, exported by libraries built with
// SNMALLOC_PROFILE=ON (empty otherwise).
#include "../global/global.h"

#if SNMALLOC_PROFILE
#  include "../profile/c_api.h"
#endif
