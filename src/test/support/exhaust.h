// Taking every block an allocator will give, for tests of what a program
// meets when there is no memory left.  Header only, without Catch2, and
// allocates nothing of its own: the blocks go to the caller's array.
#pragma once

#include <cstddef>
#include <sys/mman.h>

namespace snmalloc_test
{
  // Blocks of `largest` bytes until `alloc(size)` refuses one, then of half
  // that, and so on down to `smallest`, while `held` has room for them.
  // The number of blocks held.  `smallest` is not 0.
  template<typename Alloc>
  size_t exhaust(void** held, size_t capacity, size_t largest, size_t smallest, Alloc alloc)
  {
    size_t count = 0;
    for (size_t size = largest; size >= smallest; size /= 2)
    {
      while (count < capacity)
      {
        void* p = alloc(size);
        if (p == nullptr)
          break;
        held[count++] = p;
      }
    }
    return count;
  }

  // `bytes` of inaccessible address space, as a mapping of its own;
  // nullptr if the system (or RLIMIT_AS) refuses it.
  inline void* map_inaccessible(size_t bytes)
  {
    void* p = ::mmap(nullptr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? nullptr : p;
  }

  // Address space kept from the allocator while a test exhausts it under
  // RLIMIT_AS, where the heap takes all that the limit leaves, as glibc's
  // malloc does: given back afterwards, it is room for thread stacks that
  // the test starts then.
  class AddressSpaceSlack
  {
    void* base_;
    size_t bytes_;

  public:
    explicit AddressSpaceSlack(size_t bytes) : base_(map_inaccessible(bytes)), bytes_(bytes) {}

    bool held() const
    {
      return base_ != nullptr;
    }

    void give_back()
    {
      if (held())
        ::munmap(base_, bytes_);
      base_ = nullptr;
    }
  };
} // namespace snmalloc_test
