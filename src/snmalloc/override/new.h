#pragma once
// Layer override: every standard form of operator new and delete.

#include "../global/global.h"

#include <atomic>
#include <cstring>
#include <dlfcn.h>
#include <iterator>
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

  // Whether the function at f is in the object this code was linked into.
  inline bool defined_here(void* f) noexcept
  {
    Dl_info of_f, of_here;
    return ::dladdr(f, &of_f) != 0 && ::dladdr(reinterpret_cast<void*>(&defined_here), &of_here) != 0 &&
      of_f.dli_fbase == of_here.dli_fbase;
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
      answer = global != nullptr && defined_here(global) ? 1 : 2;
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

  // The forms of new and delete the standard defines by others: new[] and
  // the nothrow news by the plain new, the array, sized and nothrow deletes
  // by the plain delete, and so for the aligned forms.  A program may
  // replace the plain ones alone, and its other forms are then libstdc++'s,
  // which call them; under the shim they were ours, which served them
  // instead: a delete of what the program's new made (often with a header
  // of its own before the object) stopped the program as an interior free,
  // and a nothrow new's object went to the program's delete.  So a form
  // whose defining form is the program's (or forwards) forwards to
  // libstdc++'s definition of it.  Each form tests one word for that
  // (by_form), three instructions on its fast path.
  enum class Form : unsigned
  {
    NewArray,
    NewNothrow,
    NewArrayNothrow,
    NewArrayAligned,
    NewAlignedNothrow,
    NewArrayAlignedNothrow,
    DeleteArray,
    DeleteSized,
    DeleteArraySized,
    DeleteNothrow,
    DeleteArrayNothrow,
    DeleteArrayAligned,
    DeleteSizedAligned,
    DeleteArraySizedAligned,
    DeleteAlignedNothrow,
    DeleteArrayAlignedNothrow,
    Count
  };

  struct FormSymbol
  {
    const char* name;
    const char* defined_by; // a form listed before it, or a plain one
  };

  // LP64's mangled names (size_t is `m`), in Form's order.
  constexpr FormSymbol FORM_SYMBOLS[] = {
    {"_Znam", "_Znwm"},
    {"_ZnwmRKSt9nothrow_t", "_Znwm"},
    {"_ZnamRKSt9nothrow_t", "_Znam"},
    {"_ZnamSt11align_val_t", "_ZnwmSt11align_val_t"},
    {"_ZnwmSt11align_val_tRKSt9nothrow_t", "_ZnwmSt11align_val_t"},
    {"_ZnamSt11align_val_tRKSt9nothrow_t", "_ZnamSt11align_val_t"},
    {"_ZdaPv", "_ZdlPv"},
    {"_ZdlPvm", "_ZdlPv"},
    {"_ZdaPvm", "_ZdaPv"},
    {"_ZdlPvRKSt9nothrow_t", "_ZdlPv"},
    {"_ZdaPvRKSt9nothrow_t", "_ZdaPv"},
    {"_ZdaPvSt11align_val_t", "_ZdlPvSt11align_val_t"},
    {"_ZdlPvmSt11align_val_t", "_ZdlPvSt11align_val_t"},
    {"_ZdaPvmSt11align_val_t", "_ZdaPvSt11align_val_t"},
    {"_ZdlPvSt11align_val_tRKSt9nothrow_t", "_ZdlPvSt11align_val_t"},
    {"_ZdaPvSt11align_val_tRKSt9nothrow_t", "_ZdaPvSt11align_val_t"}};
  static_assert(std::size(FORM_SYMBOLS) == size_t(Form::Count));

  // Bit i: Form i forwards; FORMS_KNOWN once they have been looked up.
  constexpr uint32_t FORMS_KNOWN = uint32_t(1) << 31;
  inline std::atomic<uint32_t> forwarding_forms{0};
  inline std::atomic<void*> form_targets[size_t(Form::Count)];

  // Looked up at the first call of any form: the definitions every caller
  // binds to are known by then (the program's are loaded before it runs).
  SNMALLOC_SLOW_PATH inline uint32_t find_forwarding_forms() noexcept
  {
    uint32_t forms = FORMS_KNOWN;
    for (size_t i = 0; i < size_t(Form::Count); i++)
    {
      const char* by = FORM_SYMBOLS[i].defined_by;
      void* definer = ::dlsym(RTLD_DEFAULT, by);
      bool forwards = definer != nullptr && !defined_here(definer);
      for (size_t j = 0; j < i; j++)
        forwards |= (forms >> j & 1) != 0 && std::strcmp(FORM_SYMBOLS[j].name, by) == 0;
      void* target = forwards ? next_in_libstdcxx(FORM_SYMBOLS[i].name) : nullptr;
      if (target != nullptr)
      {
        form_targets[i].store(target, std::memory_order_relaxed);
        forms |= uint32_t(1) << i;
      }
    }
    forwarding_forms.store(forms, std::memory_order_release);
    return forms;
  }

  SNMALLOC_SLOW_PATH inline void* form_target_slow(Form form) noexcept
  {
    uint32_t forms = forwarding_forms.load(std::memory_order_acquire);
    if (forms == 0)
      forms = find_forwarding_forms();
    return (forms >> unsigned(form) & 1) != 0 ?
      form_targets[unsigned(form)].load(std::memory_order_relaxed) :
      nullptr;
  }

  // Args as `serve` takes them (deduced from it alone).
  template<typename T>
  struct AsTaken
  {
    using type = T;
  };

  // Where some form forwards (or before they are looked up): `form` by
  // libstdc++'s definition if it forwards, else by `serve`.  Out of line,
  // so that the usual call keeps nothing live across its test (inline, a
  // delete[] saved a register for it: 7 instructions against 3).
  template<Form form, typename R, typename... Args>
  SNMALLOC_SLOW_PATH R forward_or_serve(R (*serve)(Args...), typename AsTaken<Args>::type... args)
  {
    if (void* f = form_target_slow(form))
      return reinterpret_cast<R (*)(Args...)>(f)(args...);
    return serve(args...);
  }

  // A form defined by another (Form): served by `serve`, inlined, unless
  // it forwards.
  template<Form form, typename R, typename... Args>
  SNMALLOC_FAST_PATH R by_form(R (*serve)(Args...), typename AsTaken<Args>::type... args)
  {
    if (SNMALLOC_LIKELY(forwarding_forms.load(std::memory_order_acquire) == FORMS_KNOWN))
      return serve(args...);
    return forward_or_serve<form, R, Args...>(serve, args...);
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

namespace snmalloc::detail
{
  // How this library serves the forms defined by others (Form).
  inline void* new_array(size_t size)
  {
    return new_impl<false>(size);
  }
  inline void* new_nothrow(size_t size, const std::nothrow_t&)
  {
    return new_impl<true>(size);
  }
  inline void* new_array_nothrow(size_t size, const std::nothrow_t&)
  {
    return new_impl<true, true>(size);
  }
  inline void* new_array_aligned(size_t size, std::align_val_t al)
  {
    return new_aligned_impl<false>(size, al);
  }
  inline void* new_aligned_nothrow(size_t size, std::align_val_t al, const std::nothrow_t&)
  {
    return new_aligned_impl<true>(size, al);
  }
  inline void* new_array_aligned_nothrow(size_t size, std::align_val_t al, const std::nothrow_t&)
  {
    return new_aligned_impl<true, true>(size, al);
  }
  inline void delete_unsized(void* p)
  {
    dealloc(p);
  }
  inline void delete_sized(void* p, size_t size)
  {
    dealloc_as_allocated(p, size, new_is_ours<false>);
  }
  inline void delete_array_sized(void* p, size_t size)
  {
    dealloc_as_allocated(p, size, new_is_ours<true>);
  }
  inline void delete_nothrow(void* p, const std::nothrow_t&)
  {
    dealloc(p);
  }
  inline void delete_aligned(void* p, std::align_val_t)
  {
    dealloc(p);
  }
  inline void delete_sized_aligned(void* p, size_t size, std::align_val_t)
  {
    dealloc(p, size);
  }
  inline void delete_aligned_nothrow(void* p, std::align_val_t, const std::nothrow_t&)
  {
    dealloc(p);
  }
} // namespace snmalloc::detail

SNMALLOC_EXPORT void* operator new(size_t size)
{
  return snmalloc::detail::new_impl<false>(size);
}
SNMALLOC_EXPORT void* operator new[](size_t size)
{
  using namespace snmalloc::detail;
  return by_form<Form::NewArray>(new_array, size);
}
SNMALLOC_EXPORT void* operator new(size_t size, const std::nothrow_t& tag) noexcept
{
  using namespace snmalloc::detail;
  return by_form<Form::NewNothrow>(new_nothrow, size, tag);
}
SNMALLOC_EXPORT void* operator new[](size_t size, const std::nothrow_t& tag) noexcept
{
  using namespace snmalloc::detail;
  return by_form<Form::NewArrayNothrow>(new_array_nothrow, size, tag);
}
SNMALLOC_EXPORT void* operator new(size_t size, std::align_val_t al)
{
  return snmalloc::detail::new_aligned_impl<false>(size, al);
}
SNMALLOC_EXPORT void* operator new[](size_t size, std::align_val_t al)
{
  using namespace snmalloc::detail;
  return by_form<Form::NewArrayAligned>(new_array_aligned, size, al);
}
SNMALLOC_EXPORT void*
operator new(size_t size, std::align_val_t al, const std::nothrow_t& tag) noexcept
{
  using namespace snmalloc::detail;
  return by_form<Form::NewAlignedNothrow>(new_aligned_nothrow, size, al, tag);
}
SNMALLOC_EXPORT void*
operator new[](size_t size, std::align_val_t al, const std::nothrow_t& tag) noexcept
{
  using namespace snmalloc::detail;
  return by_form<Form::NewArrayAlignedNothrow>(new_array_aligned_nothrow, size, al, tag);
}

SNMALLOC_EXPORT void operator delete(void* p) noexcept
{
  snmalloc::dealloc(p);
}
SNMALLOC_EXPORT void operator delete[](void* p) noexcept
{
  using namespace snmalloc::detail;
  by_form<Form::DeleteArray>(delete_unsized, p);
}
SNMALLOC_EXPORT void operator delete(void* p, size_t size) noexcept
{
  using namespace snmalloc::detail;
  by_form<Form::DeleteSized>(delete_sized, p, size);
}
SNMALLOC_EXPORT void operator delete[](void* p, size_t size) noexcept
{
  using namespace snmalloc::detail;
  by_form<Form::DeleteArraySized>(delete_array_sized, p, size);
}
SNMALLOC_EXPORT void operator delete(void* p, const std::nothrow_t& tag) noexcept
{
  using namespace snmalloc::detail;
  by_form<Form::DeleteNothrow>(delete_nothrow, p, tag);
}
SNMALLOC_EXPORT void operator delete[](void* p, const std::nothrow_t& tag) noexcept
{
  using namespace snmalloc::detail;
  by_form<Form::DeleteArrayNothrow>(delete_nothrow, p, tag);
}
SNMALLOC_EXPORT void operator delete(void* p, std::align_val_t) noexcept
{
  snmalloc::dealloc(p);
}
SNMALLOC_EXPORT void operator delete[](void* p, std::align_val_t al) noexcept
{
  using namespace snmalloc::detail;
  by_form<Form::DeleteArrayAligned>(delete_aligned, p, al);
}
SNMALLOC_EXPORT void operator delete(void* p, size_t size, std::align_val_t al) noexcept
{
  using namespace snmalloc::detail;
  by_form<Form::DeleteSizedAligned>(delete_sized_aligned, p, size, al);
}
SNMALLOC_EXPORT void operator delete[](void* p, size_t size, std::align_val_t al) noexcept
{
  using namespace snmalloc::detail;
  by_form<Form::DeleteArraySizedAligned>(delete_sized_aligned, p, size, al);
}
SNMALLOC_EXPORT void
operator delete(void* p, std::align_val_t al, const std::nothrow_t& tag) noexcept
{
  using namespace snmalloc::detail;
  by_form<Form::DeleteAlignedNothrow>(delete_aligned_nothrow, p, al, tag);
}
SNMALLOC_EXPORT void
operator delete[](void* p, std::align_val_t al, const std::nothrow_t& tag) noexcept
{
  using namespace snmalloc::detail;
  by_form<Form::DeleteArrayAlignedNothrow>(delete_aligned_nothrow, p, al, tag);
}
