#pragma once
// Layer override: every standard form of operator new and delete.

#include "../global/global.h"

#include <atomic>
#include <cstring>
#include <dlfcn.h>
#include <new>

namespace snmalloc::detail
{
  // The plain shared shim links no libstdc++: loading it (with libm and
  // libgcc_s) was 1.5 MiB of the 2.9 MiB resident at start-up of a C
  // program under the shim (/proc/self/smaps), for nothing but the two
  // calls below.  Only a failing operator new needs them, and a program
  // that calls operator new has libstdc++ loaded: they are looked up there.
  // The profiling shim's libstdc++ is a hidden copy, whose new_handler no
  // program sets: it looks up the program's too, and throws with its own
  // copy only where the program has none (a C program, whose operator new
  // callers are the profiler's own, which catch it).
  inline std::new_handler current_new_handler() noexcept
  {
    if constexpr (config::shim_links_libstdcxx && !config::shim_libstdcxx_is_private)
      return std::get_new_handler();
    else
    {
      using Getter = std::new_handler (*)() noexcept;
      auto get = reinterpret_cast<Getter>(::dlsym(RTLD_DEFAULT, "_ZSt15get_new_handlerv"));
      return get == nullptr ? nullptr : get();
    }
  }

  // libstdc++'s exported thrower (the plain shim has no exceptions of its
  // own: no throw expression, no unwind personality to link).
  [[noreturn]] inline void throw_bad_alloc()
  {
    if constexpr (config::shim_links_libstdcxx && !config::shim_libstdcxx_is_private)
      std::__throw_bad_alloc();
    else
    {
      using Thrower = void (*)();
      auto thrower = reinterpret_cast<Thrower>(::dlsym(RTLD_DEFAULT, "_ZSt17__throw_bad_allocv"));
      if (thrower != nullptr)
        thrower();
      if constexpr (config::shim_links_libstdcxx)
        std::__throw_bad_alloc();
      report_fatal("operator new: out of memory, and no libstdc++ to throw std::bad_alloc");
    }
  }

  // Is the operator new the program calls (`array`: new[]) this
  // library's?  A program may replace operator new and keep our sized
  // delete, which then gets the size its new was asked for, while the
  // object is what that new took from malloc (often more, for a header of
  // its own): the size's class proves nothing then.  Asked at the first
  // sized delete whose size misses the object's class, the only time the
  // answer matters; dlsym finds the definition every caller binds to.
  template<bool array>
  SNMALLOC_SLOW_PATH bool new_is_ours() noexcept
  {
    static std::atomic<int> known{0}; // 0 not asked yet, 1 ours, 2 the program's
    int answer = known.load(std::memory_order_relaxed);
    if (answer == 0)
    {
      void* global = ::dlsym(RTLD_DEFAULT, array ? "_Znam" : "_Znwm");
      Dl_info of_global, of_ours;
      bool ours = global != nullptr && ::dladdr(global, &of_global) != 0 &&
        ::dladdr(reinterpret_cast<void*>(&new_is_ours<array>), &of_ours) != 0 &&
        of_global.dli_fbase == of_ours.dli_fbase;
      answer = ours ? 1 : 2;
      known.store(answer, std::memory_order_relaxed);
    }
    return answer == 1;
  }

  // new must call the new_handler until it gives up, then throw.
  template<bool nothrow>
  SNMALLOC_SLOW_PATH void* new_failed(size_t size, size_t align)
  {
    for (;;)
    {
      std::new_handler handler = current_new_handler();
      if (handler == nullptr)
      {
        if constexpr (nothrow)
          return nullptr;
        else
          throw_bad_alloc();
      }
      handler();
      void* p = align <= MIN_ALIGN ? alloc(size) : alloc_aligned(align, size);
      if (p != nullptr)
        return p;
    }
  }

  // The next definition of `symbol` after this library's, if libstdc++'s
  // (another allocator's would hand out memory of its own).
  inline void* next_in_libstdcxx(const char* symbol) noexcept
  {
    void* f = ::dlsym(RTLD_NEXT, symbol);
    Dl_info info{};
    if (f == nullptr || ::dladdr(f, &info) == 0 || info.dli_fname == nullptr ||
        std::strstr(info.dli_fname, "libstdc++") == nullptr)
      return nullptr;
    return f;
  }

  // The nothrow forms return nullptr where the throwing form would not
  // return, also where the new_handler throws.  A build with exceptions and
  // the program's libstdc++ catches here.  The plain shim has no unwinder
  // to link, and the profiling shim's hidden libstdc++ does not know the
  // program's exceptions: their catch is libstdc++'s nothrow new, which
  // calls the throwing form, ours, and returns nullptr for whatever it
  // throws.  Where there is neither, the handler is called here, uncaught.
  template<bool array>
  SNMALLOC_SLOW_PATH void* nothrow_new_failed(size_t size, size_t align) noexcept
  {
    if (current_new_handler() == nullptr)
      return nullptr;
#if __cpp_exceptions
    if constexpr (config::shim_links_libstdcxx && !config::shim_libstdcxx_is_private)
    {
      try
      {
        return new_failed<false>(size, align);
      }
      catch (...)
      {
        return nullptr;
      }
    }
#endif
    // Not std::nothrow, an object of libstdc++'s, which the plain shim
    // does not link.
    const std::nothrow_t tag{};
    if (align <= MIN_ALIGN)
    {
      using Next = void* (*)(size_t, const std::nothrow_t&) noexcept;
      if (auto next = reinterpret_cast<Next>(
            next_in_libstdcxx(array ? "_ZnamRKSt9nothrow_t" : "_ZnwmRKSt9nothrow_t")))
        return next(size, tag);
    }
    else
    {
      using Next = void* (*)(size_t, std::align_val_t, const std::nothrow_t&) noexcept;
      if (auto next = reinterpret_cast<Next>(next_in_libstdcxx(
            array ? "_ZnamSt11align_val_tRKSt9nothrow_t" : "_ZnwmSt11align_val_tRKSt9nothrow_t")))
        return next(size, std::align_val_t(align), tag);
    }
    return new_failed<true>(size, align);
  }

  template<bool nothrow, bool array = false>
  SNMALLOC_FAST_PATH void* new_impl(size_t size)
  {
    void* p = alloc(size);
    if (SNMALLOC_LIKELY(p != nullptr))
      return p;
    if constexpr (nothrow)
      return nothrow_new_failed<array>(size, MIN_ALIGN);
    else
      return new_failed<false>(size, MIN_ALIGN);
  }

  template<bool nothrow, bool array = false>
  SNMALLOC_FAST_PATH void* new_aligned_impl(size_t size, std::align_val_t al)
  {
    size_t align = static_cast<size_t>(al);
    void* p = bits::is_pow2(align) ? alloc_aligned(align, size) : nullptr;
    if (SNMALLOC_LIKELY(p != nullptr))
      return p;
    if (!bits::is_pow2(align))
    {
      if constexpr (nothrow)
        return nullptr;
      else
        throw_bad_alloc();
    }
    if constexpr (nothrow)
      return nothrow_new_failed<array>(size, align);
    else
      return new_failed<false>(size, align);
  }
} // namespace snmalloc::detail

SNMALLOC_EXPORT void* operator new(size_t size)
{
  return snmalloc::detail::new_impl<false>(size);
}
SNMALLOC_EXPORT void* operator new[](size_t size)
{
  return snmalloc::detail::new_impl<false>(size);
}
SNMALLOC_EXPORT void* operator new(size_t size, const std::nothrow_t&) noexcept
{
  return snmalloc::detail::new_impl<true>(size);
}
SNMALLOC_EXPORT void* operator new[](size_t size, const std::nothrow_t&) noexcept
{
  return snmalloc::detail::new_impl<true, true>(size);
}
SNMALLOC_EXPORT void* operator new(size_t size, std::align_val_t al)
{
  return snmalloc::detail::new_aligned_impl<false>(size, al);
}
SNMALLOC_EXPORT void* operator new[](size_t size, std::align_val_t al)
{
  return snmalloc::detail::new_aligned_impl<false>(size, al);
}
SNMALLOC_EXPORT void*
operator new(size_t size, std::align_val_t al, const std::nothrow_t&) noexcept
{
  return snmalloc::detail::new_aligned_impl<true>(size, al);
}
SNMALLOC_EXPORT void*
operator new[](size_t size, std::align_val_t al, const std::nothrow_t&) noexcept
{
  return snmalloc::detail::new_aligned_impl<true, true>(size, al);
}

SNMALLOC_EXPORT void operator delete(void* p) noexcept
{
  snmalloc::dealloc(p);
}
SNMALLOC_EXPORT void operator delete[](void* p) noexcept
{
  snmalloc::dealloc(p);
}
SNMALLOC_EXPORT void operator delete(void* p, size_t size) noexcept
{
  snmalloc::dealloc_as_allocated(p, size, snmalloc::detail::new_is_ours<false>);
}
SNMALLOC_EXPORT void operator delete[](void* p, size_t size) noexcept
{
  snmalloc::dealloc_as_allocated(p, size, snmalloc::detail::new_is_ours<true>);
}
SNMALLOC_EXPORT void operator delete(void* p, const std::nothrow_t&) noexcept
{
  snmalloc::dealloc(p);
}
SNMALLOC_EXPORT void operator delete[](void* p, const std::nothrow_t&) noexcept
{
  snmalloc::dealloc(p);
}
SNMALLOC_EXPORT void operator delete(void* p, std::align_val_t) noexcept
{
  snmalloc::dealloc(p);
}
SNMALLOC_EXPORT void operator delete[](void* p, std::align_val_t) noexcept
{
  snmalloc::dealloc(p);
}
SNMALLOC_EXPORT void operator delete(void* p, size_t size, std::align_val_t) noexcept
{
  snmalloc::dealloc(p, size);
}
SNMALLOC_EXPORT void operator delete[](void* p, size_t size, std::align_val_t) noexcept
{
  snmalloc::dealloc(p, size);
}
SNMALLOC_EXPORT void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept
{
  snmalloc::dealloc(p);
}
SNMALLOC_EXPORT void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept
{
  snmalloc::dealloc(p);
}
