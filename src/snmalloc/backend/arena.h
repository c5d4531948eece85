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
// the arena shrinks to 48 GiB.  Under an RLIMIT_AS set before start, where
// every mapping counts, reserved or not, the arena holds only what its
// frontier has reached and takes the rest as it advances (reserve_growing).

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
    // The end of the address space held: the whole arena, or under
    // RLIMIT_AS the part the frontier has reached.
    uintptr_t reserved_end_ = 0;

    static size_t base_align(size_t size) noexcept
    {
      size_t bits = bits::log2_floor(size);
      return size_t(1) << (bits < BASE_ALIGN_BITS ? bits : BASE_ALIGN_BITS);
    }

    // The pagemap of an arena of `size` bytes at `base`, of which the
    // first `held` bytes are reserved.
    bool map_pagemap(void* base, size_t size, size_t held) noexcept
    {
      size_t map_bytes = (size >> config::CHUNK_BITS) * sizeof(PagemapEntry);
      void* map = Pal::reserve_lazy_rw(map_bytes);
      if (map == nullptr)
      {
        if (held != 0)
          ::munmap(base, held);
        return false;
      }
      pagemap.entries = static_cast<PagemapEntry*>(map);
      pagemap.base = reinterpret_cast<uintptr_t>(base);
      committed_end_ = pagemap.base;
      reserved_end_ = pagemap.base + held;
      pagemap.size = size;
      return true;
    }

    // The arena at `size` bytes, its base aligned to the largest power of
    // two in it up to 2^BASE_ALIGN_BITS, and its pagemap.
    bool reserve(size_t size) noexcept
    {
      void* base = Pal::reserve_aligned(size, base_align(size));
      return base != nullptr && map_pagemap(base, size, size);
    }

    // Under RLIMIT_AS: an arena of `size` bytes of which nothing is
    // reserved yet, its address space taken as the frontier reaches it
    // (ensure_committed), so that the heap and the process's own mappings
    // (thread stacks, libraries, files) share the limit as under glibc's
    // malloc.  Reserving half of what the limit left, 384 MiB under
    // `ulimit -v 1048576`, had made malloc fail with 40% of it in use.  The
    // arena lies below where the kernel puts a new mapping (a probe page) by
    // twice what the limit leaves: the kernel places mappings top down, and
    // those of the rest of the process, which the limit bounds, stay above
    // it; if one does land in its way, MAP_FIXED_NOREPLACE refuses and the
    // heap is out of memory.
    // Its range must be free now: under a limit of 13-17 TiB it had
    // reached down to the executable, and the heap stopped there.
    bool reserve_growing(size_t size, size_t left) noexcept
    {
      void* probe = Pal::reserve(Pal::PAGE_SIZE);
      if (probe == nullptr)
        return false;
      ::munmap(probe, Pal::PAGE_SIZE);
      uintptr_t next_map = reinterpret_cast<uintptr_t>(probe);
      size_t align = base_align(size);
      if (left > next_map / 4 || next_map - 2 * left < size + align)
        return false;
      uintptr_t base = (next_map - 2 * left - size) & ~(align - 1);
      return nothing_mapped(base, base + size, left / 2) &&
        map_pagemap(reinterpret_cast<void*>(base), size, 0);
    }

    // Whether nothing is mapped in [start, end), reserved piece by piece
    // (each within what the limit leaves) and given back at once.
    static bool nothing_mapped(uintptr_t start, uintptr_t end, size_t piece) noexcept
    {
      piece = bits::align_up(piece, Pal::PAGE_SIZE);
      for (uintptr_t at = start; at < end; at += piece)
      {
        size_t bytes = end - at < piece ? end - at : piece;
        void* p = Pal::reserve_at(at, bytes);
        if (p == nullptr)
          return false;
        ::munmap(p, bytes);
      }
      return true;
    }

    // Reserve the arena up to `end` (within it): the next step, or just what
    // `end` needs when the limit leaves less than a step.  errno is left as
    // it was: a caller that fails sets ENOMEM, one that finds room another
    // way succeeds.
    bool ensure_reserved(uintptr_t end, uintptr_t step_end) noexcept
    {
      if (end <= reserved_end_)
        return true;
      int saved_errno = errno;
      auto reserve_to = [&](uintptr_t want) {
        if (Pal::reserve_at(reserved_end_, want - reserved_end_) == nullptr)
          return false;
        reserved_end_ = want;
        return true;
      };
      uintptr_t exact = bits::align_up(end, Pal::PAGE_SIZE);
      bool reserved = reserve_to(step_end) || (exact < step_end && reserve_to(exact));
      errno = saved_errno;
      return reserved;
    }

    // The largest size within `bound` (at the least the smallest) that
    // `try_size` places.
    template<typename TrySize>
    static bool reserve_within(size_t bound, TrySize try_size) noexcept
    {
      constexpr size_t smallest = size_t(3) << (MIN_BITS - 2);
      for (size_t b = MAX_BITS; b >= MIN_BITS; b--)
      {
        for (size_t size : {size_t(1) << b, size_t(3) << (b - 2)})
        {
          if ((size <= bound || size == smallest) && try_size(size))
            return true;
        }
      }
      return false;
    }

  public:
    // Reserve the arena and pagemap; false if the system gives neither.
    // Sizes go down by a power of two and three quarters of it.  Under
    // RLIMIT_AS the arena is reserved as it grows, and sized to hold all
    // that the rest of the process leaves (at most twice that: its pagemap,
    // reserved whole, is a 1,024th of it); where it cannot be placed so, it
    // is reserved whole at half of what is left, the other half for thread
    // stacks, libraries and files mapped later.  errno is left as it was:
    // the reservations that failed set it, and the malloc that called this
    // succeeds.
    bool init() noexcept
    {
      int saved_errno = errno;
      size_t left = Pal::address_space_left();
      bool limited = left != SIZE_MAX;
      bool placed = (limited && left < SIZE_MAX / 2 && reserve_within(2 * left, [&](size_t size) {
                       return reserve_growing(size, left);
                     })) ||
        reserve_within(limited ? left / 2 : left, [&](size_t size) { return reserve(size); });
      if (placed)
        errno = saved_errno;
      return placed;
    }

    // Make the arena accessible up to `end` if it is not yet.  The checks
    // build leaves it inaccessible: the backend makes each range accessible
    // as it hands it out, so that never-used memory faults.
    bool ensure_committed(uintptr_t end) noexcept
    {
      if (end <= committed_end_)
        return true;
      uintptr_t new_end = bits::align_up(end, COMMIT_STEP);
      uintptr_t arena_end = pagemap.base + pagemap.size;
      if (new_end > arena_end)
        new_end = arena_end;
      if (!ensure_reserved(end, new_end))
        return false;
      if (new_end > reserved_end_)
        new_end = reserved_end_;
      if (
        !config::checks &&
        !Pal::commit(reinterpret_cast<void*>(committed_end_), new_end - committed_end_))
        return false;
      committed_end_ = new_end;
      return true;
    }
  };
} // namespace snmalloc
