#pragma once
// Layer profile, stage "record": capturing the allocating call stack.
//
// libunwind's unw_backtrace walks the stack with the binaries' unwind
// tables and returns raw return addresses only; names are resolved at dump
// time.  The walk may take the loader's lock and may call malloc, so it runs
// with no allocator lock held and with the re-entrancy guard set.  Tests
// replace the source to get stacks that do not depend on the unwinder.

#include "settings.h"

#define UNW_LOCAL_ONLY
#include <libunwind.h>

namespace snmalloc::profile
{
  // Writes up to `max` return addresses, innermost first; returns how many.
  using StackSource = size_t (*)(uintptr_t* out, size_t max);

  inline std::atomic<StackSource> stack_source{nullptr};

  // The allocator's slow path notes the address it will return to (in
  // malloc, operator new, or the user of the inline C++ API), and the stack
  // is cut there: frames inside the allocator are not recorded, whatever
  // the optimiser inlined or turned into tail calls.  Entry points
  // themselves are kept and hidden by the profile's drop_frames.
  inline thread_local uintptr_t slow_path_return_address = 0;

  // If that address is not found (a frame the unwinder could not see), cut
  // this many: capture_stack, take_sample, the sampling hook, the
  // CoreAlloc slow path, alloc_slow.
  constexpr size_t ALLOCATOR_FRAMES = 5;

  SNMALLOC_SLOW_PATH inline size_t capture_stack(uintptr_t* out, size_t max)
  {
    if (StackSource source = stack_source.load(std::memory_order_acquire))
      return source(out, max);
    uintptr_t raw[MAX_DEPTH + ALLOCATOR_FRAMES];
    size_t want = max + ALLOCATOR_FRAMES;
    if (want > MAX_DEPTH + ALLOCATOR_FRAMES)
      want = MAX_DEPTH + ALLOCATOR_FRAMES;
    int n = unw_backtrace(reinterpret_cast<void**>(raw), int(want));
    size_t first = ALLOCATOR_FRAMES;
    for (size_t i = 0; i < size_t(n) && i <= ALLOCATOR_FRAMES + 4; i++)
    {
      if (raw[i] == slow_path_return_address)
      {
        first = i;
        break;
      }
    }
    if (size_t(n) <= first)
      return 0;
    size_t depth = size_t(n) - first;
    if (depth > max)
      depth = max;
    for (size_t i = 0; i < depth; i++)
      out[i] = raw[i + first];
    return depth;
  }
} // namespace snmalloc::profile
