#pragma once
// Layer profile/pprof, stage "write": zlib, loaded by the first dump rather than
// linked.  Only a dump compresses, and a process that never dumps (most
// children of a profiled shell or build) should not map and relocate
// libz at start-up: each library linked is opened, mapped and relocated
// by ld.so before main, which a short process notices.  dlopen allocates:
// a dump runs outside every allocator lock with the profiler's
// re-entrancy guard set, so that is safe there.

#include <dlfcn.h>
#include <zlib.h>

namespace snmalloc::profile
{
  struct Zlib
  {
    decltype(&::deflateInit2_) deflate_init2;
    decltype(&::deflate) deflate;
    decltype(&::deflateEnd) deflate_end;
  };

  // The deflate functions of libz.so.1, or nullptr if it cannot be loaded.
  inline const Zlib* zlib()
  {
    static const Zlib* const loaded = []() -> const Zlib* {
      void* library = ::dlopen("libz.so.1", RTLD_NOW | RTLD_LOCAL);
      if (library == nullptr)
        return nullptr;
      static Zlib z{
        reinterpret_cast<decltype(&::deflateInit2_)>(::dlsym(library, "deflateInit2_")),
        reinterpret_cast<decltype(&::deflate)>(::dlsym(library, "deflate")),
        reinterpret_cast<decltype(&::deflateEnd)>(::dlsym(library, "deflateEnd"))};
      if (z.deflate_init2 == nullptr || z.deflate == nullptr || z.deflate_end == nullptr)
        return nullptr;
      return &z;
    }();
    return loaded;
  }
} // namespace snmalloc::profile
