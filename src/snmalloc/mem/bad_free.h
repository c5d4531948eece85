#pragma once
// Layer mem: the one way a free the allocator can prove wrong ends: one line
// on stderr naming what is wrong and the pointer, then abort().  Never
// returns, so a bad free cannot go on to corrupt the heap.

#include "../pal/pal.h"

namespace snmalloc
{
  enum class BadFree
  {
    Invalid, // not from this allocator, or in memory it no longer hands out
    DoubleFree, // already free
    Interior, // inside an object, not at its start
    SizeMismatch, // a sized free's size: another class (delete), or larger than the object
    HeaderOverwritten, // a sampled object's header (see profile/samples/sample_list.h)
    Misaligned, // free_aligned_sized of a pointer not at its alignment
  };

  [[noreturn]] SNMALLOC_SLOW_PATH inline void report_bad_free(BadFree kind, const void* p) noexcept
  {
    switch (kind)
    {
      case BadFree::DoubleFree:
        report_fatal_at("free(): double free of", p);
      case BadFree::Interior:
        report_fatal_at("free(): interior pointer", p);
      case BadFree::SizeMismatch:
        report_fatal_at("free(): size mismatch on sized free of", p);
      case BadFree::HeaderOverwritten:
        report_fatal_at("free(): overwritten heap header below", p);
      case BadFree::Misaligned:
        report_fatal_at("free(): alignment mismatch on free_aligned_sized of", p);
      case BadFree::Invalid:
        break;
    }
    report_fatal_at("free(): invalid free of", p);
  }
} // namespace snmalloc
