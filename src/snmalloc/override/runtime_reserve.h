#pragma once
// Layer override: where the profiling shim's private copy of the C++
// runtime gets its memory at load.
//
// That copy (libstdc++ and libgcc, linked in and hidden: CMakeLists.txt)
// allocates its emergency exception pool, about 71 KiB, in a static
// initialiser.  Through our malloc, that one allocation set up the whole
// allocator (arena and pagemap reservations, metadata, a thread allocator:
// six system calls and a dozen page faults) in every process, even one
// that never allocates, which the plain shim never does; and with profiling
// started it put a 71 KiB sample of the profiler's own runtime into about
// one profile in eight.  The link wraps the runtime's malloc and free
// (-Wl,--wrap=malloc,--wrap=free: only undefined references, so only the
// runtime's, are redirected) and its first allocation, the pool, comes from
// a reserve in .bss that costs one page when written; the pool lives as
// long as the process.  Every later allocation goes to malloc.
#include "malloc.h"

#include <atomic>

#if SNMALLOC_SHIM_PRIVATE_LIBSTDCXX
namespace snmalloc::detail
{
  class RuntimeReserve
  {
    static constexpr size_t SIZE = size_t(96) << 10;
    alignas(64) static inline char bytes_[SIZE];
    static inline std::atomic<bool> taken_{false};

  public:
    // The runtime's first allocation, if it fits; else nullptr.
    static void* take(size_t size)
    {
      if (size > SIZE || taken_.exchange(true, std::memory_order_relaxed))
        return nullptr;
      return bytes_;
    }

    static bool contains(const void* p)
    {
      auto a = reinterpret_cast<uintptr_t>(p);
      auto base = reinterpret_cast<uintptr_t>(bytes_);
      return a - base < SIZE;
    }
  };
} // namespace snmalloc::detail

extern "C" void* __wrap_malloc(size_t size)
{
  if (void* p = snmalloc::detail::RuntimeReserve::take(size))
    return p;
  return malloc(size);
}

extern "C" void __wrap_free(void* p)
{
  if (!snmalloc::detail::RuntimeReserve::contains(p))
    free(p);
}
#endif
