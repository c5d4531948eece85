#pragma once
// Layer override: every standard form of operator new and delete.

#include "../global/global.h"

#include <new>


namespace snmalloc::detail
{
  // new must call the new_handler until it gives up, then throw.
  template<bool nothrow>
  SNMALLOC_SLOW_PATH void* new_failed(size_t size, size_t align)
  {
    for (;;)
    {
      std::new_handler handler = std::get_new_handler();
      if (handler == nullptr)
      {
        if constexpr (nothrow)
          return nullptr;
        else
          throw std::bad_alloc();
      }
      handler();
      void* p = align <= MIN_ALIGN ? alloc(size) : alloc_aligned(align, size);
      if (p != nullptr)
        return p;
    }
  }

  template<bool nothrow>
  SNMALLOC_FAST_PATH void* new_impl(size_t size)
  {
    void* p = alloc(size);
    if (SNMALLOC_LIKELY(p != nullptr))
      return p;
    return new_failed<nothrow>(size, MIN_ALIGN);
  }

  template<bool nothrow>
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
        throw std::bad_alloc();
    }
    return new_failed<nothrow>(size, align);
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
  return snmalloc::detail::new_impl<true>(size);
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
  return snmalloc::detail::new_aligned_impl<true>(size, al);
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
  snmalloc::dealloc(p, size);
}
SNMALLOC_EXPORT void operator delete[](void* p, size_t size) noexcept
{
  snmalloc::dealloc(p, size);
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
