#pragma once
// Layer override: glibc's own functions about its heap, answered for this
// one.  Left to glibc, they describe its heap, which holds nothing under
// the shim (its mallinfo2 reads zeros with 8 MiB live in ours), and its
// malloc_trim gives back nothing of ours.  (mallopt and malloc_info are
// left to glibc: no setting of ours is made that way.)

#include "../global/global.h"

#include <climits>
#include <cstdio>
#include <malloc.h>
#include <unistd.h>

#if defined(__GLIBC__)
namespace snmalloc::detail
{
  // The fields of glibc's mallinfo2 and mallinfo this heap fills (a struct
  // of its own: mallinfo2 is glibc 2.33's).
  struct GlibcHeapInfo
  {
    size_t arena, hblks, hblkhd, uordblks, fordblks;
  };

  // glibc's figures from ours.  Large runs are its mmapped chunks (hblks,
  // hblkhd); the rest of the heap's memory is its arena, in use (uordblks)
  // or free (fordblks), so that uordblks + hblkhd is what is live.  The
  // checks build's guard pages around large runs count as free: they are
  // never resident.
  inline GlibcHeapInfo glibc_heap_info()
  {
    Stats s = stats();
    GlibcHeapInfo info{};
    info.hblks = s.large_runs;
    info.hblkhd = s.large_live_bytes;
    size_t heap = s.resident_bytes;
    info.arena = heap > s.large_live_bytes ? heap - s.large_live_bytes : 0;
    info.uordblks = s.small_live_bytes < info.arena ? s.small_live_bytes : info.arena;
    info.fordblks = info.arena - info.uordblks;
    return info;
  }

  inline int saturated_int(size_t v)
  {
    return v > size_t(INT_MAX) ? INT_MAX : int(v);
  }
} // namespace snmalloc::detail

extern "C"
{
#  if __GLIBC_PREREQ(2, 33)
  SNMALLOC_EXPORT struct mallinfo2 mallinfo2(void)
  {
    snmalloc::detail::GlibcHeapInfo i = snmalloc::detail::glibc_heap_info();
    struct mallinfo2 info{};
    info.arena = i.arena;
    info.hblks = i.hblks;
    info.hblkhd = i.hblkhd;
    info.uordblks = i.uordblks;
    info.fordblks = i.fordblks;
    return info;
  }
#  endif

  // The older form, whose int fields saturate (glibc's wrap).
  SNMALLOC_EXPORT struct mallinfo mallinfo(void)
  {
    using snmalloc::detail::saturated_int;
    snmalloc::detail::GlibcHeapInfo i = snmalloc::detail::glibc_heap_info();
    struct mallinfo info{};
    info.arena = saturated_int(i.arena);
    info.hblks = saturated_int(i.hblks);
    info.hblkhd = saturated_int(i.hblkhd);
    info.uordblks = saturated_int(i.uordblks);
    info.fordblks = saturated_int(i.fordblks);
    return info;
  }

  // Memory back to the OS now rather than at its decay (snmalloc::trim).
  // `pad` is glibc's margin at the top of its heap, which this one has
  // not.  1 if any was returned, as glibc's.
  SNMALLOC_EXPORT int malloc_trim(size_t)
  {
    return snmalloc::trim() > 0 ? 1 : 0;
  }

  // The statistics on stderr, as glibc's prints its own there; one write,
  // with no allocation.
  SNMALLOC_EXPORT void malloc_stats(void)
  {
    snmalloc::Stats s = snmalloc::stats();
    char text[512];
    int n = std::snprintf(
      text,
      sizeof(text),
      "snmalloc heap:\n"
      "live bytes      = %10llu (small %llu, large %llu in %llu runs)\n"
      "peak live bytes = %10llu\n"
      "slab bytes      = %10llu\n"
      "resident bytes <= %10llu\n"
      "metadata bytes  = %10llu\n"
      "profiler bytes  = %10llu\n",
      static_cast<unsigned long long>(s.live_bytes),
      static_cast<unsigned long long>(s.small_live_bytes),
      static_cast<unsigned long long>(s.large_live_bytes),
      static_cast<unsigned long long>(s.large_runs),
      static_cast<unsigned long long>(s.peak_live_bytes),
      static_cast<unsigned long long>(s.slab_bytes),
      static_cast<unsigned long long>(s.resident_bytes),
      static_cast<unsigned long long>(s.meta_bytes),
      static_cast<unsigned long long>(s.profiler_bytes));
    if (n > 0)
      (void)!::write(STDERR_FILENO, text, size_t(n) < sizeof(text) ? size_t(n) : sizeof(text) - 1);
  }
}
#endif
