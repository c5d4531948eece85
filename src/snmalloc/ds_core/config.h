#pragma once
// Layer ds_core: the one place where build options become constants.
// Everywhere else branches on these with `if constexpr`.

#include <cstddef>
#include <cstdint>

#ifndef SNMALLOC_PROFILE
#  define SNMALLOC_PROFILE 0
#endif
#ifndef SNMALLOC_CHECKS
#  define SNMALLOC_CHECKS 0
#endif

// Defined by the build of libsnmallocshim.so, which is linked without
// libstdc++, and of libsnmallocshim-profile.so, which links a hidden copy
// of the parts the profiler uses.
#ifndef SNMALLOC_SHIM_WITHOUT_LIBSTDCXX
#  define SNMALLOC_SHIM_WITHOUT_LIBSTDCXX 0
#endif
#ifndef SNMALLOC_SHIM_PRIVATE_LIBSTDCXX
#  define SNMALLOC_SHIM_PRIVATE_LIBSTDCXX 0
#endif

// The stack walker CMake's SNMALLOC_PROFILE_UNWINDER chose when it is not
// the default for the architecture (built-in on x86-64, libgcc elsewhere).
#ifndef SNMALLOC_PROFILE_UNWINDER_LIBUNWIND
#  define SNMALLOC_PROFILE_UNWINDER_LIBUNWIND 0
#endif
#ifndef SNMALLOC_PROFILE_UNWINDER_LIBGCC
#  define SNMALLOC_PROFILE_UNWINDER_LIBGCC 0
#endif
#if defined(__x86_64__)
#  define SNMALLOC_HAS_BUILTIN_UNWINDER 1
#else
#  define SNMALLOC_HAS_BUILTIN_UNWINDER 0
#endif

namespace snmalloc::config
{
  constexpr bool profile = SNMALLOC_PROFILE != 0;
  // The checks build (libsnmallocshim-checks.so): every free is checked on
  // the fast path, at the cost of speed (docs/design.md, checks build).
  constexpr bool checks = SNMALLOC_CHECKS != 0;

  // Whether operator new may use libstdc++ directly (override/new.h), and
  // whether that libstdc++ is the shim's own copy rather than the program's.
  constexpr bool shim_links_libstdcxx = SNMALLOC_SHIM_WITHOUT_LIBSTDCXX == 0;
  constexpr bool shim_libstdcxx_is_private = SNMALLOC_SHIM_PRIVATE_LIBSTDCXX != 0;

  // What walks a sampled stack (profile/stacks/): the built-in .eh_frame
  // walker with its rule cache (x86-64 only), libunwind's unw_backtrace,
  // or libgcc's _Unwind_Backtrace.
  enum class Unwinder
  {
    Builtin,
    Libunwind,
    Libgcc,
  };
  constexpr Unwinder unwinder = SNMALLOC_PROFILE_UNWINDER_LIBUNWIND != 0 ? Unwinder::Libunwind :
    SNMALLOC_PROFILE_UNWINDER_LIBGCC != 0 || SNMALLOC_HAS_BUILTIN_UNWINDER == 0 ?
                                                                           Unwinder::Libgcc :
                                                                           Unwinder::Builtin;

  // Granularity of the pagemap and of the backend.
  constexpr size_t CHUNK_BITS = 14;
  constexpr size_t CHUNK_SIZE = size_t(1) << CHUNK_BITS;

  constexpr size_t MIN_ALLOC_BITS = 4;
  constexpr size_t MIN_ALLOC_SIZE = size_t(1) << MIN_ALLOC_BITS;

  // Largest size served from slabs; larger requests are whole chunks.
  constexpr size_t MAX_SMALL_BITS = 16;
  constexpr size_t MAX_SMALL_SIZE = size_t(1) << MAX_SMALL_BITS;

  // A slab holds at least this many objects.
  constexpr size_t MIN_OBJECTS_PER_SLAB = 12;

  // The smallest slab: four chunks.  A free reads its slab's descriptor,
  // and with 16 KiB slabs perf-random-replace (20,000 live objects of
  // 16..1024 bytes) had four times the descriptors, which random frees
  // found cold: 64 KiB slabs miss the last level 16% less (cachegrind,
  // 3.86 M -> 3.25 M at 2,000,000 ops) for 1% fewer instructions
  // (docs/performance.md).  The checks build keeps one-chunk slabs: a
  // small heap then spans less accessible memory, so that a far write
  // past an object meets an uncommitted chunk sooner.
  constexpr size_t MIN_SLAB_BITS = checks ? CHUNK_BITS : 16;
  constexpr size_t MIN_SLAB_SIZE = size_t(1) << MIN_SLAB_BITS;

  // A sleeping slab wakes after a quarter of its objects have come back,
  // or after this many bytes of them if that is fewer.  Objects freed long
  // before their slab woke were out of the cache when handed out again: a
  // slab of a dozen 16 KiB objects waited for four frees.  At 2 KiB, a
  // 16 KiB slab of objects over 128 bytes wakes twice as often, and so is
  // refilled twice as often: callgrind of perf-random-replace (2M
  // operations, sizes 16..1024) 429.8 M instructions against 394.2 M at
  // 4 KiB, for 13% fewer misses of a 512 KiB last level (7.17 M against
  // 8.29 M); docs/performance.md.
  constexpr size_t SLAB_WAKE_BYTES = 4096;

  // Bytes of objects a fresh slab's first refill links, at least two
  // objects (ds/sizeclass.h).
  constexpr size_t SLAB_FIRST_STEP_BYTES = 4096;

  // Remote frees are posted once this many bytes are cached for others.
  // Against 1 MiB, 256 KiB cut peak RSS of a producer/consumer benchmark
  // from 4.4 to 3.6 MiB and of larson from 7.4 to 6.3 MiB, for 12% of the
  // producer/consumer throughput (still well ahead of the others there).
  constexpr size_t REMOTE_CACHE_BYTES = size_t(1) << 18;

  // Free memory still resident is returned to the OS after one to two
  // periods, or at once when there is more than the limit of it.
  constexpr int64_t DECAY_PERIOD_NS = 500 * 1000 * 1000;
  constexpr size_t DIRTY_LIMIT_BYTES = size_t(256) << 20;

  // A run of at least this many bytes placed in fresh memory, when no free
  // block still resident holds it, gives back the pages of those blocks at
  // once: a process that frees a large buffer and then asks for pieces that
  // together come to a little more (GNU sort: 200 MiB, then four of 50 MiB
  // and 32 bytes) would otherwise hold the fresh run and the freed
  // leftover both, until the decay (a peak of 251 MiB against glibc's 205).
  // Fresh pages are faulted in for such a run anyway, and the freed
  // blocks' pages cost as many again only if they are reused.  Large-object
  // churn, of at most 4 MiB, never comes near it.
  constexpr size_t FRESH_RUN_RELEASE_BYTES = size_t(8) << 20;
} // namespace snmalloc::config
