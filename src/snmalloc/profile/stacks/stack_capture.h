#pragma once
// Layer profile/stacks, stage "record": capturing the allocating call stack.
//
// The stack is walked with the binaries' DWARF unwind tables, the ones
// C++ exceptions use (frame_rules.h), so code built without frame pointers
// unwinds as exactly as code built with them; only raw return addresses
// are kept, names are resolved at dump time.  The rule of each address is
// cached (frame_rule_cache.h), so a sample's walk is a few loads per frame; a stack with a frame
// the rules do not cover (a signal frame, a realigned stack) is walked by
// a library instead (library_walkers.h).  That built-in walker is x86-64's;
// elsewhere, or when the build chose one (config::unwinder), a library
// walks every stack.  The walk may take the loader's lock, so it runs with
// no allocator lock held and with the re-entrancy guard set.  Tests replace
// the source to get stacks that do not depend on the unwinder.

#include "frame_rule_cache.h"
#include "library_walkers.h"
#include "walk_memo.h"

#include <dlfcn.h>
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

  // Where a sample's walk starts: the frame of the allocator's sampling
  // hook (global/slow_paths.h, alloc_sample_due for small objects,
  // alloc_large_sampling for large ones), which keeps a frame pointer for
  // it, so the frames of the profiler and of the allocator below it (five
  // of them) are not walked: on perf-xthread-mix about 200 instructions of
  // a sample's 2,000.  Set by entered_sample_path, taken by the next
  // capture, and cleared by the other way to a sample (entered_slow_path,
  // realloc's growth in place), so that it never outlives its frame.  `frame` is
  // rbp there: the saved rbp at it, the return address into alloc_slow
  // above it.
  struct WalkStart
  {
    uintptr_t frame = 0;
    uintptr_t return_address = 0;
  };

  inline thread_local WalkStart sample_walk_start;

  // This thread's last walk from a sampling hook (walk_memo.h).
  inline thread_local WalkMemo last_sample_walk;

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
    void* functions_[MAX] = {};
    std::atomic<size_t> count_{0};
    // Their extents, looked up (dladdr1) at the first sample, not at
    // start-up: 40,000 instructions a process that never samples need not
    // pay.  A thread that finds them unresolved resolves them itself; none
    // waits for another (which might wait for the loader's lock this one
    // holds), and all store the same values.
    std::atomic<uintptr_t> start_[MAX] = {};
    std::atomic<uintptr_t> end_[MAX] = {};
    std::atomic<size_t> resolved_{0};
    // Bounds that need no lookup: no entry point starts below the lowest
    // or is longer than SPAN (they are short wrappers), so an address
    // outside [lowest_, highest_ + SPAN] is in none.  The usual caller is
    // in another object, and a short program's first sample then skips
    // the 17 dladdr1 calls (35,000 instructions of a C++ program's start).
    static constexpr uintptr_t SPAN = 64 * 1024;
    uintptr_t lowest_ = 0;
    uintptr_t highest_ = 0;

    SNMALLOC_SLOW_PATH void resolve(size_t n) noexcept
    {
      for (size_t i = 0; i < n; i++)
      {
        Dl_info info;
        void* entry = nullptr; // dladdr1 writes a const ElfW(Sym)* here
        uintptr_t start = 0, end = 0;
        if (
          ::dladdr1(functions_[i], &info, &entry, RTLD_DL_SYMENT) != 0 && entry != nullptr &&
          info.dli_saddr != nullptr)
        {
          start = reinterpret_cast<uintptr_t>(info.dli_saddr);
          end = start + static_cast<const ElfW(Sym)*>(entry)->st_size;
        }
        start_[i].store(start, std::memory_order_relaxed);
        end_[i].store(end, std::memory_order_relaxed);
      }
      resolved_.store(n, std::memory_order_release);
    }

  public:
    // The entry points are `n` functions whose symbols (with their sizes)
    // the dynamic linker knows; others are ignored.  Called once, before
    // threads start.  (Written, not read, first: reading an untouched page
    // of .bss and then writing it is two page faults at start-up.)
    void set(void* const* fns, size_t n) noexcept
    {
      n = n < MAX ? n : MAX;
      uintptr_t lowest = UINTPTR_MAX, highest = 0;
      for (size_t i = 0; i < n; i++)
      {
        functions_[i] = fns[i];
        uintptr_t at = reinterpret_cast<uintptr_t>(fns[i]);
        lowest = at < lowest ? at : lowest;
        highest = at > highest ? at : highest;
      }
      lowest_ = lowest;
      highest_ = highest;
      count_.store(n, std::memory_order_release);
    }

    // A return address inside one of them (it may equal the end when the
    // call is the function's last instruction).
    bool contains(uintptr_t return_address) noexcept
    {
      size_t n = count_.load(std::memory_order_acquire);
      if (return_address <= lowest_ || return_address > highest_ + SPAN)
        return false;
      if (SNMALLOC_UNLIKELY(resolved_.load(std::memory_order_acquire) != n))
        resolve(n);
      for (size_t i = 0; i < n; i++)
      {
        if (
          return_address > start_[i].load(std::memory_order_relaxed) &&
          return_address <= end_[i].load(std::memory_order_relaxed))
          return true;
      }
      return false;
    }
  };

  inline EntryPoints entry_points;

#if defined(__x86_64__)
  // Return addresses of the frames from the one whose code is at `address`
  // (an instruction; for a caller, inside its call) with stack pointer
  // `sp` and rbp `bp`, outwards; SIZE_MAX if a frame needs the toolchain's
  // unwinder.  `note` is told each return address read
  // (return_address(at, value)), each saved rbp read (saved_rbp(at,
  // value)), and before each use of rbp (rbp_used()): a walk's result
  // depends on these alone (walk_memo.h).
  template<typename Note>
  SNMALLOC_FAST_PATH size_t step_frames(
    uintptr_t address, uintptr_t sp, uintptr_t bp, uintptr_t* out, size_t max, Note&& note)
  {
    size_t n = 0;
    while (n < max)
    {
      // One frame: its CFA (the caller's rsp) from rsp or rbp, the return
      // address just below it, rbp restored if the frame saved it.
      bool from_rbp, rbp_saved;
      uintptr_t cfa_offset, rbp_below_cfa;
      FrameRuleCache::Step step;
      FrameRule rule;
      if (SNMALLOC_LIKELY(frame_rule_cache.step_at(address, step, rule)))
      {
        from_rbp = step.cfa_from_rbp();
        cfa_offset = step.cfa_offset();
        rbp_saved = step.rbp_saved();
        rbp_below_cfa = step.rbp_below_cfa();
      }
      else
      {
        if (rule.kind == FrameRule::Kind::Unsupported)
          return SIZE_MAX;
        if (rule.kind != FrameRule::Kind::Step)
          break;
        from_rbp = rule.cfa_from_rbp;
        cfa_offset = uintptr_t(intptr_t(rule.cfa_offset));
        rbp_saved = rule.rbp_saved;
        rbp_below_cfa = uintptr_t(-intptr_t(rule.rbp_offset));
      }
      if (from_rbp)
        note.rbp_used();
      uintptr_t cfa = (from_rbp ? bp : sp) + cfa_offset;
      if (cfa <= sp) // callers' frames lie above: a wrong table, stop
        break;
      const auto* return_address_at = reinterpret_cast<const uintptr_t*>(cfa - 8);
      uintptr_t return_address = *return_address_at;
      note.return_address(return_address_at, return_address);
      if (rbp_saved)
      {
        const auto* bp_at = reinterpret_cast<const uintptr_t*>(cfa - rbp_below_cfa);
        bp = *bp_at;
        note.saved_rbp(bp_at, bp);
      }
      sp = cfa;
      if (return_address == 0)
        break;
      out[n++] = return_address;
      address = return_address - 1; // inside the call instruction
    }
    return n;
  }
#endif

  // Return addresses from this function's own (an address in its caller)
  // outwards; SIZE_MAX if a frame needs the toolchain's unwinder.
  SNMALLOC_SLOW_PATH inline size_t walk_stack(uintptr_t* out, size_t max)
  {
#if defined(__x86_64__)
    uintptr_t ip, sp, bp;
    // rbp first: when this function uses rbp as an ordinary register, an
    // output may be given it.
    asm volatile("movq %%rbp, %2\n\tmovq %%rsp, %1\n\tleaq 0(%%rip), %0"
                 : "=&r"(ip), "=&r"(sp), "=&r"(bp));
    // ip: an instruction of this function, not a call
    return step_frames(ip, sp, bp, out, max, WalkMemo::NoNote{});
#else
    // The rules are x86-64's (frame_rules.h): elsewhere the toolchain's
    // unwinder walks every stack.
    (void)out;
    (void)max;
    return SIZE_MAX;
#endif
  }

  // A walk from `start`'s frame (see walk_stack_from) that its memo could
  // not replay: into `out`, and kept for the next if it can be replayed.
  SNMALLOC_SLOW_PATH inline size_t walk_stack_afresh(WalkStart start, uintptr_t* out, size_t max)
  {
#if defined(__x86_64__)
    const auto* frame = reinterpret_cast<const uintptr_t*>(start.frame);
    WalkMemo& memo = last_sample_walk;
    memo.begin(start.frame, start.return_address, frame[0], max);
    // The hook's frame stepped by its frame pointer: the CFA above the
    // return address, rbp saved at the frame.
    size_t n = step_frames(start.return_address - 1, start.frame + 16, frame[0], out, max, memo);
    if (n == SIZE_MAX || n > WalkMemo::MAX_FRAMES)
      return n;
    bool permanent = frame_rule_cache.cached_permanent(start.return_address - 1);
    for (size_t i = 0; i < n && permanent; i++)
      permanent = frame_rule_cache.cached_permanent(out[i] - 1);
    memo.keep(out, n, permanent);
    return n;
#else
    (void)start;
    (void)out;
    (void)max;
    return 0;
#endif
  }

  // Return addresses from the caller of `start`'s frame outwards, as
  // walk_stack would find them there; 0 if that frame is not live on this
  // stack (below the caller's own, into which this is inlined, or its
  // return address changed), SIZE_MAX if a frame needs the toolchain's
  // unwinder.  They are left at `frames`: in
  // `out`, or in the thread's memo of its last walk when that replays
  // (then nothing is walked or copied; inline, a replay costs no call).
  SNMALLOC_FAST_PATH size_t
  walk_stack_from(WalkStart start, uintptr_t* out, size_t max, const uintptr_t*& frames)
  {
    frames = out;
#if defined(__x86_64__)
    uintptr_t here = reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
    if (start.frame < here)
      return 0;
    const auto* frame = reinterpret_cast<const uintptr_t*>(start.frame);
    if (frame[1] != start.return_address)
      return 0;
    if (size_t n = last_sample_walk.replay(start.frame, start.return_address, frame[0], max, frames))
      return n;
#endif
    return walk_stack_afresh(start, out, max);
  }

  // Return addresses from one in this function outwards, by the walker
  // this build chose (config::unwinder): for stacks other than samples'
  // (a free of a guarded object, a fault), whose top frames the reader cuts.
  SNMALLOC_SLOW_PATH inline size_t walk_current_stack(uintptr_t* out, size_t max)
  {
    if constexpr (config::unwinder != config::Unwinder::Builtin)
    {
      return walk_stack_fully(out, max);
    }
    else
    {
      frame_rule_cache.start_walk();
      size_t n = walk_stack(out, max);
      return n == SIZE_MAX ? walk_stack_fully(out, max) : n;
    }
  }

  // Room for the allocator's frames, an entry point's, and slack.
  constexpr size_t CAPTURE_CUT = ALLOCATOR_FRAMES + 4;

  // A sample's stack: `depth` return addresses at `frames`, the
  // innermost first, in the buffer given to capture_stack or in the
  // thread's memo of its last walk (until its next sample).
  struct CapturedStack
  {
    const uintptr_t* frames;
    size_t depth;
  };

  // The stack of the allocation being sampled, up to `max` (at most
  // MAX_DEPTH) frames, walked into `raw` (or replayed from the memo) and
  // cut there: the frames are left where they lie, not copied out.
  SNMALLOC_SLOW_PATH inline CapturedStack
  capture_stack(uintptr_t (&raw)[MAX_DEPTH + CAPTURE_CUT], size_t max)
  {
    if (StackSource source = stack_source.load(std::memory_order_acquire))
      return {raw, source(raw, max < MAX_DEPTH ? max : MAX_DEPTH)};
    size_t want = (max < MAX_DEPTH ? max : MAX_DEPTH) + CAPTURE_CUT;
    WalkStart start = sample_walk_start;
    sample_walk_start = {};
    size_t first = ALLOCATOR_FRAMES;
    const uintptr_t* walked = raw;
    size_t n;
    if constexpr (config::unwinder == config::Unwinder::Builtin)
    {
      frame_rule_cache.start_walk();
      // Started at the hook, the walk's first address is alloc_slow's
      // return.
      n = start.frame != 0 ? walk_stack_from(start, raw, want, walked) : 0;
      if (n != 0)
        first = 0;
      else
        n = walk_stack(raw, want);
      if (n == SIZE_MAX)
      {
        n = walk_stack_fully(raw, want);
        first = ALLOCATOR_FRAMES;
        walked = raw;
      }
    }
    else
    {
      n = walk_stack_fully(raw, want);
    }
    for (size_t i = 0; i < n && i < CAPTURE_CUT; i++)
    {
      if (walked[i] == slow_path_return_address)
      {
        first = i;
        break;
      }
    }
    while (first < n && entry_points.contains(walked[first]))
      first++;
    if (n <= first)
      return {raw, 0};
    size_t depth = n - first;
    if (depth > max)
      depth = max;
    return {walked + first, depth};
  }
} // namespace snmalloc::profile
