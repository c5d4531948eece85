#pragma once
// Layer profile/pprof, stage "write": zlib, loaded by the first dump rather than
// linked.  Only a dump compresses, and a process that never dumps (most
// children of a profiled shell or build) should not map and relocate
// libz at start-up: each library linked is opened, mapped and relocated
// by ld.so before main, which a short process notices.  dlopen allocates:
// a dump runs outside every allocator lock with the profiler's
// re-entrancy guard set, so that is safe there.  Where it cannot be loaded
// the profile is written as it is (dump_file.h).

#include <cstdio>
#include <dlfcn.h>
#include <unistd.h>
#include <zlib.h>

namespace snmalloc::profile
{
  struct Zlib
  {
    decltype(&::deflateInit2_) deflate_init2;
    decltype(&::deflate) deflate;
    decltype(&::deflateEnd) deflate_end;
  };

  namespace zlib_loader_detail
  {
    // Once, on stderr: the profiles of this process are not compressed.
    inline void say_not_loaded(const char* why)
    {
      char line[512];
      int n = std::snprintf(
        line,
        sizeof(line),
        "snmalloc: cannot load libz.so.1 (%s); profiles are written uncompressed\n",
        why != nullptr ? why : "its deflate functions are missing");
      if (n > 0)
        (void)!::write(2, line, size_t(n) < sizeof(line) ? size_t(n) : sizeof(line) - 1);
    }
  } // namespace zlib_loader_detail

  // The deflate functions of libz.so.1, or nullptr if it cannot be loaded
  // (said once on stderr).
  inline const Zlib* zlib()
  {
    static const Zlib* const loaded = []() -> const Zlib* {
      void* library = ::dlopen("libz.so.1", RTLD_NOW | RTLD_LOCAL);
      if (library == nullptr)
      {
        zlib_loader_detail::say_not_loaded(::dlerror());
        return nullptr;
      }
      static Zlib z{
        reinterpret_cast<decltype(&::deflateInit2_)>(::dlsym(library, "deflateInit2_")),
        reinterpret_cast<decltype(&::deflate)>(::dlsym(library, "deflate")),
        reinterpret_cast<decltype(&::deflateEnd)>(::dlsym(library, "deflateEnd"))};
      if (z.deflate_init2 == nullptr || z.deflate == nullptr || z.deflate_end == nullptr)
      {
        zlib_loader_detail::say_not_loaded(nullptr);
        return nullptr;
      }
      return &z;
    }();
    return loaded;
  }
} // namespace snmalloc::profile
