#pragma once
// Layer profile/footprint: which pages of a range are resident, from
// mincore(2): one byte per page, one system call per range.
//
// mincore rather than /proc/self/pagemap: both say whether an anonymous
// page is present, pagemap with 8 bytes per page read through a file (2 MiB
// for a 1 GiB range), mincore with 1 byte per page into our own buffer.
// Measured over a resident 1 GiB range (perf-footprint-time, on a loaded
// machine): mincore 0.5-1 ms, pagemap 35-60 ms.  Neither sees
// swapped-out pages as resident, as VmRSS does not count them.  A page only
// read since it was mapped shows the shared zero page: mincore calls it
// resident, VmRSS does not count it; the allocator hands out pages it
// writes, so this is rare in the heap.

#include "../../pal/pal.h"

#include <sys/mman.h>
#include <vector>

namespace snmalloc::profile
{
  // The residency of [base, base + bytes), page-aligned, read once.
  class ResidentPages
  {
    uintptr_t base_ = 0;
    std::vector<unsigned char> pages_;
    // Resident pages before page i: answers a range in two reads.
    std::vector<uint32_t> before_;

  public:
    ResidentPages() = default;

    ResidentPages(uintptr_t base, size_t bytes)
    {
      base_ = base & ~(Pal::PAGE_SIZE - 1);
      size_t count = (base + bytes - base_ + Pal::PAGE_SIZE - 1) / Pal::PAGE_SIZE;
      if (bytes == 0)
        return;
      pages_.resize(count);
      if (::mincore(reinterpret_cast<void*>(base_), count * Pal::PAGE_SIZE, pages_.data()) != 0)
      {
        pages_.clear();
        return;
      }
      before_.resize(count + 1);
      before_[0] = 0;
      for (size_t i = 0; i < count; i++)
        before_[i + 1] = before_[i] + (pages_[i] & 1);
    }

    // Resident bytes of the pages that [from, to) touches, clipped to the
    // range read.  A page shared by two objects counts for each.
    size_t bytes_in(uintptr_t from, uintptr_t to) const
    {
      if (pages_.empty() || to <= base_)
        return 0;
      uintptr_t end = base_ + pages_.size() * Pal::PAGE_SIZE;
      from = from < base_ ? base_ : from;
      to = to > end ? end : to;
      if (from >= to)
        return 0;
      size_t first = (from - base_) / Pal::PAGE_SIZE;
      size_t last = (to - base_ + Pal::PAGE_SIZE - 1) / Pal::PAGE_SIZE;
      return size_t(before_[last] - before_[first]) * Pal::PAGE_SIZE;
    }

    // The resident share of [from, to): resident bytes of its pages over
    // their bytes, 0 to 1.
    double fraction_in(uintptr_t from, uintptr_t to) const
    {
      if (to <= from)
        return 0;
      uintptr_t first = from & ~(Pal::PAGE_SIZE - 1);
      uintptr_t last = (to + Pal::PAGE_SIZE - 1) & ~(Pal::PAGE_SIZE - 1);
      return double(bytes_in(from, to)) / double(last - first);
    }
  };

  // Resident bytes of one range, read on its own.
  inline size_t resident_bytes(uintptr_t base, size_t bytes)
  {
    ResidentPages r(base, bytes);
    return r.bytes_in(base, base + bytes);
  }
} // namespace snmalloc::profile
