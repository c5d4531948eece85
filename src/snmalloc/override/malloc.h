#pragma once
// Layer override: the C allocation functions, defined on top of the C++
// front.  Included by exactly one translation unit of a program or shim.

#include "../global/global.h"

#include <climits>
// glibc's declarations first: a definition that follows a system header's
// may leave out its noexcept, one that precedes it may not.
#include <malloc.h>

namespace snmalloc::detail
{
  // Multiply, reporting overflow as ENOMEM.
  inline bool checked_mul(size_t a, size_t b, size_t& out)
  {
    if (__builtin_mul_overflow(a, b, &out))
    {
      errno = ENOMEM;
      return false;
    }
    return true;
  }

  inline bool valid_alignment(size_t align)
  {
    return bits::is_pow2(align);
  }
} // namespace snmalloc::detail

extern "C"
{
  SNMALLOC_EXPORT void* malloc(size_t size)
  {
    return snmalloc::alloc(size);
  }

  SNMALLOC_EXPORT void free(void* p)
  {
    snmalloc::dealloc(p);
  }

  SNMALLOC_EXPORT void cfree(void* p)
  {
    snmalloc::dealloc(p);
  }

  // C23's sized frees.  `size` is the one asked of malloc, calloc or
  // realloc; an object smaller than it stops the program (checked off the
  // fast path, on every path in the checks build, as the aligned sized
  // deletes are).  A larger object is no error: a realloc that shrank in
  // place leaves one.  Defined here even where the C library has them, as
  // every free must be: the C library's would hand this allocator's
  // objects to its own free.
  SNMALLOC_EXPORT void free_sized(void* p, size_t size)
  {
    snmalloc::dealloc(p, size);
  }

  // And an object of aligned_alloc(align, size): at a multiple of `align`,
  // a power of two, else it is not the object that call returned.  A null
  // pointer is freed as free's is, whatever the alignment (aligned_alloc
  // returns null for a bad one).
  SNMALLOC_EXPORT void free_aligned_sized(void* p, size_t align, size_t size)
  {
    if (SNMALLOC_UNLIKELY(
          p != nullptr &&
          (!snmalloc::detail::valid_alignment(align) ||
           (reinterpret_cast<uintptr_t>(p) & (align - 1)) != 0)))
      snmalloc::report_bad_free(snmalloc::BadFree::Misaligned, p);
    snmalloc::dealloc(p, size);
  }

  SNMALLOC_EXPORT void* calloc(size_t n, size_t size)
  {
    size_t total;
    if (!snmalloc::detail::checked_mul(n, size, total))
      return nullptr;
    return snmalloc::alloc_zeroed(total);
  }

  SNMALLOC_EXPORT void* realloc(void* p, size_t size)
  {
    return snmalloc::reallocate(p, size);
  }

  SNMALLOC_EXPORT void* reallocarray(void* p, size_t n, size_t size)
  {
    size_t total;
    if (!snmalloc::detail::checked_mul(n, size, total))
      return nullptr;
    return snmalloc::reallocate(p, total);
  }

  SNMALLOC_EXPORT size_t malloc_usable_size(void* p)
  {
    return snmalloc::alloc_size(p);
  }

  // As glibc's: an alignment that is not a power of two is rounded up to
  // one (memalign predates the stricter interfaces; programs rely on it).
  SNMALLOC_EXPORT void* memalign(size_t align, size_t size)
  {
    if (align > (size_t(1) << (snmalloc::bits::BITS - 1)))
    {
      errno = EINVAL;
      return nullptr;
    }
    return snmalloc::alloc_aligned(snmalloc::bits::next_pow2(align ? align : 1), size);
  }

  // C11: the alignment must be a power of two (EINVAL otherwise).
  SNMALLOC_EXPORT void* aligned_alloc(size_t align, size_t size)
  {
    if (!snmalloc::detail::valid_alignment(align))
    {
      errno = EINVAL;
      return nullptr;
    }
    return snmalloc::alloc_aligned(align, size);
  }

  SNMALLOC_EXPORT int posix_memalign(void** out, size_t align, size_t size)
  {
    if (!snmalloc::detail::valid_alignment(align) || align < sizeof(void*))
      return EINVAL;
    void* p = snmalloc::alloc_aligned(align, size);
    if (p == nullptr)
      return ENOMEM;
    *out = p;
    return 0;
  }

  SNMALLOC_EXPORT void* valloc(size_t size)
  {
    return snmalloc::alloc_aligned(snmalloc::Pal::PAGE_SIZE, size);
  }

  SNMALLOC_EXPORT void* pvalloc(size_t size)
  {
    constexpr size_t page = snmalloc::Pal::PAGE_SIZE;
    if (size > SIZE_MAX - page)
    {
      errno = ENOMEM;
      return nullptr;
    }
    return snmalloc::alloc_aligned(page, snmalloc::bits::align_up(size ? size : 1, page));
  }

  // glibc's own names for these functions, which some programs and
  // libraries call to reach "the C library's malloc" past a wrapper of
  // their own: left to glibc, they would hand its objects to this free (and
  // this allocator's to its free), which stops the program.  Functions of
  // their own, not aliases, so that a debugger, perf or a profile names
  // malloc as malloc, not as glibc's.
  SNMALLOC_EXPORT void* __libc_malloc(size_t size)
  {
    return malloc(size);
  }

  SNMALLOC_EXPORT void* __libc_calloc(size_t n, size_t size)
  {
    return calloc(n, size);
  }

  SNMALLOC_EXPORT void* __libc_realloc(void* p, size_t size)
  {
    return realloc(p, size);
  }

  SNMALLOC_EXPORT void __libc_free(void* p)
  {
    free(p);
  }

  SNMALLOC_EXPORT void* __libc_memalign(size_t align, size_t size)
  {
    return memalign(align, size);
  }

  SNMALLOC_EXPORT void* __libc_valloc(size_t size)
  {
    return valloc(size);
  }

  SNMALLOC_EXPORT void* __libc_pvalloc(size_t size)
  {
    return pvalloc(size);
  }

  // Lets tests and tools confirm that this allocator is the one in use.
  SNMALLOC_EXPORT const char* snmalloc_identity(void)
  {
    return "snmalloc";
  }
}
