#pragma once
// Layer profile/stacks, stage "record": the stack walks a library does,
// libgcc's `_Unwind_Backtrace` (every C++ link brings it) and libunwind's
// `unw_backtrace` (linked only when the build chose it, CMake's
// SNMALLOC_PROFILE_UNWINDER).  Both know every kind of frame, signal frames included.
// libgcc reads each frame's table afresh: 13,391 instructions a warm
// 16-frame walk on x86-64, against libunwind's 1,711, which keeps a cache of
// frame shapes by address (its "fast trace"), and the built-in walker's 730
// (stack_capture.h).  Where there is no built-in walker, libunwind's is
// the default when it is installed.
//
// Every walker reports return addresses themselves, as the profile's
// readers expect (they look up the byte before each, in the call).
// libunwind's cached walk on aarch64 reports each minus 1, its uncached one
// (a frame its cache does not know) the address itself: normalised here,
// else the cut at the allocator's slow path found no match and the two
// walks of one call site gave two addresses.

#include "../core/settings.h"

#include <unwind.h>

#if SNMALLOC_PROFILE_UNWINDER_LIBUNWIND
#  define UNW_LOCAL_ONLY
#  include <libunwind.h>
#endif

namespace snmalloc::profile
{
  namespace library_walkers_detail
  {
    struct Trace
    {
      uintptr_t* out;
      size_t max;
      size_t n;
      size_t skip;
    };

    inline _Unwind_Reason_Code add_frame(_Unwind_Context* context, void* arg)
    {
      auto* trace = static_cast<Trace*>(arg);
      if (trace->skip > 0)
      {
        trace->skip--;
        return _URC_NO_REASON;
      }
      uintptr_t ip = _Unwind_GetIP(context);
      // After the outermost frame libgcc reports a caller at 0.
      if (trace->n == trace->max || ip == 0)
        return _URC_END_OF_STACK;
      trace->out[trace->n++] = ip;
      return _URC_NO_REASON;
    }

#if defined(__aarch64__)
    constexpr uintptr_t INSTRUCTION_ALIGNMENT = 4;
#else
    constexpr uintptr_t INSTRUCTION_ALIGNMENT = 1;
#endif

    // The return address whatever libunwind reported: the next instruction
    // boundary (x86-64's libunwind reports the address itself).
    constexpr uintptr_t return_address_of(uintptr_t reported)
    {
      return (reported + INSTRUCTION_ALIGNMENT - 1) & ~(INSTRUCTION_ALIGNMENT - 1);
    }
  } // namespace library_walkers_detail

  // Return addresses from this function's own (an address in its caller)
  // outwards, by libgcc's unwinder.
  SNMALLOC_SLOW_PATH inline size_t walk_stack_libgcc(uintptr_t* out, size_t max)
  {
    // The first address, in this function, is skipped.
    library_walkers_detail::Trace trace{out, max, 0, 1};
    _Unwind_Backtrace(library_walkers_detail::add_frame, &trace);
    return trace.n;
  }

#if SNMALLOC_PROFILE_UNWINDER_LIBUNWIND
  // The same by libunwind's.
  SNMALLOC_SLOW_PATH inline size_t walk_stack_libunwind(uintptr_t* out, size_t max)
  {
    // unw_backtrace fills its whole buffer: one more than wanted, and
    // the first, this function's own address, dropped.
    uintptr_t raw[MAX_DEPTH + 16];
    constexpr size_t ROOM = sizeof(raw) / sizeof(raw[0]);
    size_t want = max + 1 < ROOM ? max + 1 : ROOM;
    int n = ::unw_backtrace(reinterpret_cast<void**>(raw), int(want));
    if (n <= 1)
      return 0;
    for (int i = 1; i < n; i++)
      out[i - 1] = library_walkers_detail::return_address_of(raw[i]);
    return size_t(n - 1);
  }
#endif

  // The library walker of this build: for every stack where there is no
  // built-in walker or the build chose a library, and for the frames the
  // built-in walker does not follow.
#if SNMALLOC_PROFILE_UNWINDER_LIBUNWIND
  inline constexpr auto& walk_stack_fully = walk_stack_libunwind;
#else
  inline constexpr auto& walk_stack_fully = walk_stack_libgcc;
#endif
} // namespace snmalloc::profile
