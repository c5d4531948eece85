#pragma once
// Layer override: the C API of the profiler, exported by libraries built with
// SNMALLOC_PROFILE=ON (empty otherwise).
#include "../global/global.h"

#if SNMALLOC_PROFILE
#  include "malloc.h"
#  include "new.h"
#  include "auto_dump.h"
#  include "c_api.h"

// At library initialisation, before main(): tell the profiler which
// functions are allocation entry points (so their frames are never part of
// a recorded stack), then read SNMALLOC_PROFILE=... from the environment.
__attribute__((constructor)) static void snmalloc_profile_initialise()
{
  using New = void* (*)(size_t);
  using NewAligned = void* (*)(size_t, std::align_val_t);
  using NewNothrow = void* (*)(size_t, const std::nothrow_t&) noexcept;
  using NewAlignedNothrow = void* (*)(size_t, std::align_val_t, const std::nothrow_t&) noexcept;
  void* const entries[] = {
    reinterpret_cast<void*>(&malloc),
    reinterpret_cast<void*>(&calloc),
    reinterpret_cast<void*>(&realloc),
    reinterpret_cast<void*>(&reallocarray),
    reinterpret_cast<void*>(&memalign),
    reinterpret_cast<void*>(&aligned_alloc),
    reinterpret_cast<void*>(&posix_memalign),
    reinterpret_cast<void*>(&valloc),
    reinterpret_cast<void*>(&pvalloc),
    reinterpret_cast<void*>(static_cast<New>(&::operator new)),
    reinterpret_cast<void*>(static_cast<New>(&::operator new[])),
    reinterpret_cast<void*>(static_cast<NewAligned>(&::operator new)),
    reinterpret_cast<void*>(static_cast<NewAligned>(&::operator new[])),
    reinterpret_cast<void*>(static_cast<NewNothrow>(&::operator new)),
    reinterpret_cast<void*>(static_cast<NewNothrow>(&::operator new[])),
    reinterpret_cast<void*>(static_cast<NewAlignedNothrow>(&::operator new)),
    reinterpret_cast<void*>(static_cast<NewAlignedNothrow>(&::operator new[]))};
  for (void* entry : entries)
    snmalloc::profile::entry_points.add(entry);
  snmalloc::profile::AutoDump::instance().configure_from_environment();
}
#endif
