#pragma once
// Layer profile/stacks, stage "record": a thread's last sample walk, kept as
// the stack words it read, so that the next sample from the same place is
// not walked again.
//
// A walk from the sampling hook's frame (stack_capture.h, walk_stack_from)
// is fixed by where it starts (the hook's frame, its return address and
// saved rbp) and by the words it reads on the way out: each frame's return
// address and, where the frame saved it, the caller's rbp; the frame rules
// it steps by are fixed by the return addresses.  So a walk that starts
// where the kept one did and finds each of those words unchanged, read
// where the kept walk read it and in the same order (each place follows
// from the words before it), would return the kept addresses: it is
// replayed, a load and a compare a word, instead of a rule looked up a
// frame.  On large-object churn at 512 KiB (a sample of every other
// allocation, nearly all from one call site) the walk was 280 of a
// sample's 1,500 instructions.
//
// Rules can change only where a library is unloaded: only walks whose
// every frame is in permanent code (FrameRuleCache::cached_permanent) are
// kept.  Walks of more than MAX_FRAMES frames are not kept.

#include <cstddef>
#include <cstdint>

namespace snmalloc::profile
{
  class WalkMemo
  {
  public:
    static constexpr size_t MAX_FRAMES = 16;

  private:
    static constexpr size_t MAX_READS = 2 * MAX_FRAMES + 1;

    // The walk's start; frame 0 when none is kept.
    uintptr_t frame_ = 0;
    uintptr_t noted_frame_ = 0; // the start of the walk being noted
    uintptr_t return_address_ = 0;
    uintptr_t bp_ = 0;
    size_t max_ = 0;
    size_t depth_ = 0;
    size_t reads_ = 0;
    const uintptr_t* read_at_[MAX_READS] = {};
    uintptr_t read_value_[MAX_READS] = {};
    uintptr_t frames_[MAX_FRAMES] = {};

  public:
    // The kept walk's addresses into `out`, and how many, if it started at
    // (frame, return_address, bp) asking for `max` and every word it read
    // is unchanged; otherwise 0.
    size_t replay(uintptr_t frame, uintptr_t return_address, uintptr_t bp, size_t max, uintptr_t* out) const
    {
      if (frame != frame_ || return_address != return_address_ || bp != bp_ || max != max_)
        return 0;
      for (size_t i = 0; i < reads_; i++)
      {
        if (*read_at_[i] != read_value_[i])
          return 0;
      }
      for (size_t i = 0; i < depth_; i++)
        out[i] = frames_[i];
      return depth_;
    }

    // A walk from (frame, return_address, bp) asking for `max` begins:
    // forget the kept one, and note its reads from here on.
    void begin(uintptr_t frame, uintptr_t return_address, uintptr_t bp, size_t max)
    {
      frame_ = 0;
      return_address_ = return_address;
      bp_ = bp;
      max_ = max;
      reads_ = 0;
      noted_frame_ = frame;
    }

    // The walk read `value` at `at`.
    void note(const uintptr_t* at, uintptr_t value)
    {
      if (reads_ < MAX_READS)
      {
        read_at_[reads_] = at;
        read_value_[reads_] = value;
      }
      reads_++;
    }

    // The walk returned `depth` addresses in `out`, all of them (and the
    // start) in permanent code if `permanent`: keep it if it can be
    // replayed.
    void keep(const uintptr_t* out, size_t depth, bool permanent)
    {
      if (!permanent || depth == 0 || depth > MAX_FRAMES || reads_ > MAX_READS)
        return;
      for (size_t i = 0; i < depth; i++)
        frames_[i] = out[i];
      depth_ = depth;
      frame_ = noted_frame_;
    }
  };
} // namespace snmalloc::profile
