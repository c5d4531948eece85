#pragma once
// Layer backend: the arena, the one address-space reservation that every
// chunk the allocator hands out comes from, and the pagemap covering it.
//
// The arena is reserved inaccessible and committed (mprotect) in steps as the
// buddy allocator's frontier advances (in the checks build, range by range
// as the backend hands chunks out: backend/backend.h).  Its size is the largest that the
// system grants, from 16 TiB down: a normal Linux process gets 16 TiB of
// address space (a 16 GiB lazily committed pagemap); under valgrind, which
// refuses reservations of 64 GiB or more, the arena shrinks to 32 GiB.

#include "../ds/ds.h"

namespace snmalloc
{
  class Arena
  {
  public:
    // The arena's base is aligned to this, so every buddy block is aligned to
    // its own size in absolute terms up to this bound: the largest alignment
    // the allocator can honour.
    static constexpr size_t BASE_ALIGN_BITS = 32;

  private:
    static constexpr size_t MAX_BITS = 44;
    static constexpr size_t MIN_BITS = 32;
    static constexpr size_t COMMIT_STEP = size_t(64) << 20;

    uintptr_t committed_end_ = 0;

  public:
    // Reserve the arena and pagemap; false if the system gives neither.
    bool init() noexcept
    {
      for (size_t b = MAX_BITS; b >= MIN_BITS; b--)
      {
        size_t size = size_t(1) << b;
        size_t align = size_t(1) << BASE_ALIGN_BITS;
        void* raw = Pal::reserve(size + align);
        if (raw == nullptr)
          continue;
        size_t map_bytes = (size >> config::CHUNK_BITS) * sizeof(PagemapEntry);
        void* map = Pal::reserve_lazy_rw(map_bytes);
        if (map == nullptr)
        {
          ::munmap(raw, size + align);
          continue;
        }
        uintptr_t start = reinterpret_cast<uintptr_t>(raw);
        uintptr_t base = bits::align_up(start, align);
        // Hand back the unaligned slack on either side.
        if (base != start)
          ::munmap(raw, base - start);
        if (start + align != base)
          ::munmap(reinterpret_cast<void*>(base + size), start + align - base);
        pagemap.entries = static_cast<PagemapEntry*>(map);
        pagemap.base = base;
        committed_end_ = base;
        pagemap.size = size;
        return true;
      }
      return false;
    }

    // Make the arena accessible up to `end` if it is not yet.  The checks
    // build leaves it inaccessible: the backend makes each range accessible
    // as it hands it out, so that never-used memory faults.
    bool ensure_committed(uintptr_t end) noexcept
    {
      if (config::checks || end <= committed_end_)
        return true;
      uintptr_t new_end = bits::align_up(end, COMMIT_STEP);
      uintptr_t arena_end = pagemap.base + pagemap.size;
      if (new_end > arena_end)
        new_end = arena_end;
      if (!Pal::commit(
            reinterpret_cast<void*>(committed_end_), new_end - committed_end_))
        return false;
      committed_end_ = new_end;
      return true;
    }
  };
} // namespace snmalloc
