#pragma once
// Layer override: the C API of the profiler, exported by libraries built with
// SNMALLOC_PROFILE=ON (empty otherwise).
#include "../global/global.h"

#if SNMALLOC_PROFILE
#  include "malloc.h"
#  include "new.h"
#  include "auto_dump.h"
#  include "c_api.h"

// Hidden aliases of the allocation entry points, whose addresses the
// profiler needs.  Taking an exported function's address goes through the
// GOT: 17 symbol lookups by the dynamic linker in every process, about 9 k
// instructions of a 180 k start.  An alias's address is PC-relative.
// (The operator new names are the Itanium ABI's for a 64-bit size_t.)
// They are never called, so the attributes of their targets (malloc,
// alloc_size, nothrow) are left off.
static_assert(std::is_same_v<size_t, unsigned long>);
#  pragma GCC diagnostic push
#  if !defined(__clang__) // clang has no such warning, and -Werror fails on one it does not know
#    pragma GCC diagnostic ignored "-Wmissing-attributes"
#  endif
#  define SNMALLOC_ENTRY_ALIAS(name, target, ...) \
    extern "C" __attribute__((alias(target), visibility("hidden"))) void* name(__VA_ARGS__)
SNMALLOC_ENTRY_ALIAS(snmalloc_entry_malloc, "malloc", size_t);
SNMALLOC_ENTRY_ALIAS(snmalloc_entry_calloc, "calloc", size_t, size_t);
SNMALLOC_ENTRY_ALIAS(snmalloc_entry_realloc, "realloc", void*, size_t);
SNMALLOC_ENTRY_ALIAS(snmalloc_entry_reallocarray, "reallocarray", void*, size_t, size_t);
SNMALLOC_ENTRY_ALIAS(snmalloc_entry_memalign, "memalign", size_t, size_t);
SNMALLOC_ENTRY_ALIAS(snmalloc_entry_aligned_alloc, "aligned_alloc", size_t, size_t);
SNMALLOC_ENTRY_ALIAS(snmalloc_entry_valloc, "valloc", size_t);
SNMALLOC_ENTRY_ALIAS(snmalloc_entry_pvalloc, "pvalloc", size_t);
SNMALLOC_ENTRY_ALIAS(snmalloc_entry_new, "_Znwm", size_t);
SNMALLOC_ENTRY_ALIAS(snmalloc_entry_new_array, "_Znam", size_t);
SNMALLOC_ENTRY_ALIAS(snmalloc_entry_new_aligned, "_ZnwmSt11align_val_t", size_t, std::align_val_t);
SNMALLOC_ENTRY_ALIAS(snmalloc_entry_new_array_aligned, "_ZnamSt11align_val_t", size_t, std::align_val_t);
SNMALLOC_ENTRY_ALIAS(
  snmalloc_entry_new_nothrow, "_ZnwmRKSt9nothrow_t", size_t, const std::nothrow_t&) noexcept;
SNMALLOC_ENTRY_ALIAS(
  snmalloc_entry_new_array_nothrow, "_ZnamRKSt9nothrow_t", size_t, const std::nothrow_t&) noexcept;
SNMALLOC_ENTRY_ALIAS(
  snmalloc_entry_new_aligned_nothrow,
  "_ZnwmSt11align_val_tRKSt9nothrow_t",
  size_t,
  std::align_val_t,
  const std::nothrow_t&) noexcept;
SNMALLOC_ENTRY_ALIAS(
  snmalloc_entry_new_array_aligned_nothrow,
  "_ZnamSt11align_val_tRKSt9nothrow_t",
  size_t,
  std::align_val_t,
  const std::nothrow_t&) noexcept;
extern "C" __attribute__((alias("posix_memalign"), visibility("hidden"))) int
snmalloc_entry_posix_memalign(void**, size_t, size_t);
#  undef SNMALLOC_ENTRY_ALIAS
#  pragma GCC diagnostic pop

// At library initialisation, before main(): tell the profiler which
// functions are allocation entry points (so their frames are never part of
// a recorded stack), then read SNMALLOC_PROFILE=... from the environment.
__attribute__((constructor)) static void snmalloc_profile_initialise()
{
  void* const entries[] = {
    reinterpret_cast<void*>(&snmalloc_entry_malloc),
    reinterpret_cast<void*>(&snmalloc_entry_calloc),
    reinterpret_cast<void*>(&snmalloc_entry_realloc),
    reinterpret_cast<void*>(&snmalloc_entry_reallocarray),
    reinterpret_cast<void*>(&snmalloc_entry_memalign),
    reinterpret_cast<void*>(&snmalloc_entry_aligned_alloc),
    reinterpret_cast<void*>(&snmalloc_entry_posix_memalign),
    reinterpret_cast<void*>(&snmalloc_entry_valloc),
    reinterpret_cast<void*>(&snmalloc_entry_pvalloc),
    reinterpret_cast<void*>(&snmalloc_entry_new),
    reinterpret_cast<void*>(&snmalloc_entry_new_array),
    reinterpret_cast<void*>(&snmalloc_entry_new_aligned),
    reinterpret_cast<void*>(&snmalloc_entry_new_array_aligned),
    reinterpret_cast<void*>(&snmalloc_entry_new_nothrow),
    reinterpret_cast<void*>(&snmalloc_entry_new_array_nothrow),
    reinterpret_cast<void*>(&snmalloc_entry_new_aligned_nothrow),
    reinterpret_cast<void*>(&snmalloc_entry_new_array_aligned_nothrow)};
  snmalloc::profile::entry_points.set(entries, sizeof(entries) / sizeof(entries[0]));
  snmalloc::profile::AutoDump::instance().configure_from_environment();
}
#endif
