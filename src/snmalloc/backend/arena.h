#pragma once
// Layer backend: the arena, the one address-space reservation that every
// chunk the allocator hands out comes from, and the pagemap covering it.
//
// The arena is reserved inaccessible and committed (mprotect) in steps as the
// buddy allocator's frontier advances (in the checks build, range by range
// as the backend hands chunks out: backend/backend.h).  Its size is the
// largest that the system grants, from 16 TiB down to 192 MiB: a normal
// Linux process gets 16 TiB of address space (a 16 GiB lazily committed
// pagemap); under valgrind, which refuses reservations of 64 GiB or more,
// the arena shrinks to 48 GiB; under an RLIMIT_AS set before start, to
// half of what the rest of the process leaves.

#include "../ds/ds.h"

#include <initializer_list>

namespace snmalloc
{
  class Arena
  {
  public:
    // The arena's base is aligned to this, or to the largest power of two
    // in its size if smaller, so every buddy block is aligned to its own
    // size in absolute terms up to this bound: the largest alignment the
    // allocator can honour.
    static constexpr size_t BASE_ALIGN_BITS = 32;

  private:
    static constexpr size_t MAX_BITS = 44;
    // 192 MiB at the least (three quarters of 2^MIN_BITS): a process under
    // `ulimit -v 1G` still runs.
    static constexpr size_t MIN_BITS = 28;
    static constexpr size_t COMMIT_STEP = size_t(64) << 20;

    uintptr_t committed_end_ = 0;

    // The arena at `size` bytes, its base aligned to the largest power of
    // two in it up to 2^BASE_ALIGN_BITS, and its pagemap.
    bool reserve(size_t size) noexcept
    {
      size_t align_bits = bits::log2_floor(size);
      if (align_bits > BASE_ALIGN_BITS)
        align_bits = BASE_ALIGN_BITS;
      void* base = Pal::reserve_aligned(size, size_t(1) << align_bits);
      if (base == nullptr)
        return false;
      size_t map_bytes = (size >> config::CHUNK_BITS) * sizeof(PagemapEntry);
      void* map = Pal::reserve_lazy_rw(map_bytes);
      if (map == nullptr)
      {
        ::munmap(base, size);
        return false;
      }
      pagemap.entries = static_cast<PagemapEntry*>(map);
      pagemap.base = reinterpret_cast<uintptr_t>(base);
      committed_end_ = pagemap.base;
      pagemap.size = size;
      return true;
    }

  public:
    // Reserve the arena and pagemap; false if the system gives neither.
    // Sizes go down by a power of two and three quarters of it.  Under
    // RLIMIT_AS the arena takes at most half of what the rest of the
    // process leaves, the other half for thread stacks, libraries and files
    // mapped later (under `ulimit -v 1048576`: 384 MiB, and 79 threads of
    // 8 MiB stacks could start, 127 under glibc's malloc; taking what it
    // could, 768 MiB, left room for 31).  errno is left as it was: the
    // reservations that failed set it, and the malloc that called this
    // succeeds.
    bool init() noexcept
    {
      int saved_errno = errno;
      size_t bound = Pal::address_space_left() / 2;
      constexpr size_t smallest = size_t(3) << (MIN_BITS - 2);
      for (size_t b = MAX_BITS; b >= MIN_BITS; b--)
      {
        for (size_t size : {size_t(1) << b, size_t(3) << (b - 2)})
        {
          if ((size <= bound || size == smallest) && reserve(size))
          {
            errno = saved_errno;
            return true;
          }
        }
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
