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
#include <dlfcn.h>
#include <libunwind.h>
#include <link.h>

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

  // The entry points (malloc, operator new, ...) usually reach alloc_slow
  // by a tail call and leave no frame; where they do not (unoptimised
  // builds), their frame is cut too.  The override layer registers them at
  // start-up, so the depth a user asks for counts the user's frames only.
  class EntryPoints
  {
    static constexpr size_t MAX = 32;
    uintptr_t start_[MAX] = {};
    uintptr_t end_[MAX] = {};
    std::atomic<size_t> count_{0};

  public:
    // `fn` must be a function whose symbol (with its size) the dynamic
    // linker knows; others are ignored.
    void add(void* fn) noexcept
    {
      Dl_info info;
      void* entry = nullptr; // dladdr1 writes a const ElfW(Sym)* here
      if (::dladdr1(fn, &info, &entry, RTLD_DL_SYMENT) == 0 || entry == nullptr)
        return;
      const auto* symbol = static_cast<const ElfW(Sym)*>(entry);
      if (symbol->st_size == 0 || info.dli_saddr == nullptr)
        return;
      size_t i = count_.load(std::memory_order_relaxed);
      if (i == MAX)
        return;
      start_[i] = reinterpret_cast<uintptr_t>(info.dli_saddr);
      end_[i] = start_[i] + symbol->st_size;
      count_.store(i + 1, std::memory_order_release);
    }

    // A return address inside one of them (it may equal the end when the
    // call is the function's last instruction).
    bool contains(uintptr_t return_address) const noexcept
    {
      size_t n = count_.load(std::memory_order_acquire);
      for (size_t i = 0; i < n; i++)
      {
        if (return_address > start_[i] && return_address <= end_[i])
          return true;
      }
      return false;
    }
  };

  inline EntryPoints entry_points;

  SNMALLOC_SLOW_PATH inline size_t capture_stack(uintptr_t* out, size_t max)
  {
    if (StackSource source = stack_source.load(std::memory_order_acquire))
      return source(out, max);
    // Room for the allocator's frames, an entry point's, and slack.
    constexpr size_t CUT = ALLOCATOR_FRAMES + 4;
    uintptr_t raw[MAX_DEPTH + CUT];
    size_t want = (max < MAX_DEPTH ? max : MAX_DEPTH) + CUT;
    int n = unw_backtrace(reinterpret_cast<void**>(raw), int(want));
    size_t first = ALLOCATOR_FRAMES;
    for (size_t i = 0; i < size_t(n) && i < CUT; i++)
    {
      if (raw[i] == slow_path_return_address)
      {
        first = i;
        break;
      }
    }
    while (first < size_t(n) && entry_points.contains(raw[first]))
      first++;
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
