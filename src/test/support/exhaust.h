// Taking every block an allocator will give, for tests of what a program
// meets when there is no memory left.  Header only, without Catch2, and
// allocates nothing of its own: the blocks go to the caller's array.
#pragma once

#include <cstddef>

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
} // namespace snmalloc_test
