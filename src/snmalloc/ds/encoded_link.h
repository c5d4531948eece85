#pragma once
// Layer ds: how the links stored inside free objects are written.
//
// The checks build stores a link as `next ^ mask(at)`, where `at` is the
// link's own address and the mask mixes it with a per-process secret
// drawn at arena start-up.  A link overwritten by the program (a write
// after free, an overflow from the object before) or forged without the
// secret decodes to a pointer that is nowhere near its list, which the
// readers check (FreeObject::next_object, CoreAlloc::dealloc_local), so
// the corruption stops the program instead of handing out arbitrary
// memory.  Mixing in the address makes two free objects holding the same
// pointer store different words, so one leaked link gives the secret to
// nobody reading another.  The same mask marks freed objects in the checks
// build (FreeObject::mark_free).  The default build's mask is 0: links are
// plain pointers, and the code is the same instruction for instruction.
//
// The default build marks freed runs of chunks instead (large objects,
// released slabs; the checks build makes them inaccessible): the run's
// first word holds `freed_run_mark(at)` while its pages stay resident, and
// the backend compares it when the chunk is taken again
// (backend/block_marks.h), so a write after free into the start of a large
// object stops the program at the next allocation there instead of going
// unseen.  Without a secret the mark finds mistakes, not forgeries, as the
// default build's plain links do.

#include "../pal/pal.h"

namespace snmalloc
{
  // Zero until the arena exists; no free object exists before then.
  inline uintptr_t link_secret = 0;

  // Called once, under the backend's lock, before the first chunk is handed
  // out.
  inline void init_link_secret() noexcept
  {
    if constexpr (config::checks)
    {
      if (link_secret == 0)
        link_secret = Pal::entropy64() | 1;
    }
  }

  // The address and the secret mixed: a multiply by an odd constant
  // spreads every bit of both over the high bits, which the readers check.
  SNMALLOC_FAST_PATH uintptr_t mix_with_secret(const void* at)
  {
    return (reinterpret_cast<uintptr_t>(at) ^ link_secret) * 0x9e3779b97f4a7c15;
  }

  SNMALLOC_FAST_PATH uintptr_t link_mask(const void* at)
  {
    if constexpr (!config::checks)
    {
      (void)at;
      return 0;
    }
    return mix_with_secret(at);
  }

  // The word a freed run holds at `at`, its start.
  inline uintptr_t freed_run_mark(const void* at)
  {
    return mix_with_secret(at);
  }

  SNMALLOC_FAST_PATH uintptr_t encode_link(const void* next, const void* at)
  {
    return reinterpret_cast<uintptr_t>(next) ^ link_mask(at);
  }

  template<typename T>
  SNMALLOC_FAST_PATH T* decode_link(uintptr_t stored, const void* at)
  {
    return reinterpret_cast<T*>(stored ^ link_mask(at));
  }

  // A link that decodes to a pointer its list cannot hold.
  [[noreturn]] SNMALLOC_SLOW_PATH inline void report_corrupt_link(const void* at) noexcept
  {
    report_fatal_at("free list corrupted (write after free?) at", at);
  }
} // namespace snmalloc
