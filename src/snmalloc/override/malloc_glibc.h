#pragma once
// Layer override: glibc's own functions about its heap, answered for this
// one.  Left to glibc, they describe its heap, which holds nothing under
// the shim (its mallinfo2 reads zeros with 8 MiB live in ours), and its
// malloc_trim gives back nothing of ours.  (mallopt is left to glibc: no
// setting of ours is made that way.)

#include "../global/global.h"

#include <cerrno>
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
  inline GlibcHeapInfo glibc_heap_info(const Stats& s)
  {
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
    snmalloc::detail::GlibcHeapInfo i = snmalloc::detail::glibc_heap_info(snmalloc::stats());
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
    snmalloc::detail::GlibcHeapInfo i = snmalloc::detail::glibc_heap_info(snmalloc::stats());
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

  // glibc's XML report, of this heap, in glibc's elements: as its free
  // chunks by size, each small class's free objects (in its slabs; those
  // in threads' fast lists and not yet handled remote frees count as live,
  // as in the statistics), their sum its `rest`; large runs as its
  // mmapped chunks; the rest of the heap as its arena (the statistics keep
  // no peak of it, so `max` is the current size).  Free chunks still
  // resident are in the arena's size but in no free total (mallinfo2
  // counts them in fordblks).  Any `options` but 0 is EINVAL, as glibc's.
  SNMALLOC_EXPORT int malloc_info(int options, FILE* fp)
  {
    if (options != 0)
      return EINVAL;
    using ull = unsigned long long;
    snmalloc::Stats s = snmalloc::stats();
    snmalloc::detail::GlibcHeapInfo heap = snmalloc::detail::glibc_heap_info(s);
    std::fputs("<malloc version=\"1\">\n<heap nr=\"0\">\n<sizes>\n", fp);
    ull free_count = 0, free_bytes = 0, from = 1;
    for (snmalloc::sizeclass_t sc = 0; sc < snmalloc::NUM_SMALL_CLASSES; sc++)
    {
      const snmalloc_sizeclass_stats& c = s.sizeclasses[sc];
      ull objects = c.slabs * snmalloc::sizeclasses.capacity[sc];
      if (objects > c.live_objects)
      {
        ull n = objects - c.live_objects;
        std::fprintf(
          fp,
          "  <size from=\"%llu\" to=\"%llu\" total=\"%llu\" count=\"%llu\"/>\n",
          from,
          ull(c.object_size),
          n * c.object_size,
          n);
        free_count += n;
        free_bytes += n * c.object_size;
      }
      from = c.object_size + 1;
    }
    char totals[256];
    std::snprintf(
      totals,
      sizeof(totals),
      "<total type=\"fast\" count=\"0\" size=\"0\"/>\n"
      "<total type=\"rest\" count=\"%llu\" size=\"%llu\"/>\n",
      free_count,
      free_bytes);
    char system[256];
    std::snprintf(
      system,
      sizeof(system),
      "<system type=\"current\" size=\"%llu\"/>\n<system type=\"max\" size=\"%llu\"/>\n"
      "<aspace type=\"total\" size=\"%llu\"/>\n<aspace type=\"mprotect\" size=\"%llu\"/>\n",
      ull(heap.arena),
      ull(heap.arena),
      ull(heap.arena),
      ull(heap.arena));
    std::fprintf(
      fp,
      "</sizes>\n%s%s</heap>\n%s<total type=\"mmap\" count=\"%llu\" size=\"%llu\"/>\n%s</malloc>\n",
      totals,
      system,
      totals,
      ull(heap.hblks),
      ull(heap.hblkhd),
      system);
    return 0;
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
