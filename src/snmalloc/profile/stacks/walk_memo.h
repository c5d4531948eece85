#pragma once
// Layer profile/stacks, stage "record": a thread's last sample walk, kept as
// the stack words it depended on, so that the next sample from the same
// place is not walked again.
//
// A walk from the sampling hook's frame (stack_capture.h, walk_stack_from)
// is fixed by where it starts (the hook's frame and return address, and
// the rbp saved there if a frame finds its CFA from rbp before rbp is
// restored) and by the words it reads on the way out that it goes on to
// use: each frame's return address, and a saved rbp that a later frame
// finds its CFA from.  The frame rules it steps by are fixed by the return
// addresses.  So a walk that starts where the kept one did and finds each
// of those words unchanged, read where the kept walk read it, would return
// the kept addresses: it is replayed, a load and a compare a word, instead
// of a rule looked up a frame.  (Where each word lies follows from the
// words checked before it, so a replay reads only what the walk would.)
// A saved rbp that no frame uses is left out: where code keeps data in
// rbp it differs from call to call.  On large-object churn at 512 KiB (a
// sample of every other allocation, nearly all from one call site) the
// walk was 280 of a sample's 1,500 instructions.
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

    // What a walk that keeps nothing tells (step_frames' `note`).
    struct NoNote
    {
      void return_address(const uintptr_t*, uintptr_t) {}
      void saved_rbp(const uintptr_t*, uintptr_t) {}
      void rbp_used() {}
    };

  private:
    static constexpr size_t MAX_READS = 2 * MAX_FRAMES;

    // The kept walk's start; frame 0 when none is kept.
    uintptr_t frame_ = 0;
    uintptr_t return_address_ = 0;
    uintptr_t bp_ = 0;
    bool uses_bp_ = false; // whether the walk used bp_ itself
    size_t max_ = 0;
    size_t depth_ = 0;
    size_t reads_ = 0;
    const uintptr_t* read_at_[MAX_READS] = {};
    uintptr_t read_value_[MAX_READS] = {};
    uintptr_t frames_[MAX_FRAMES] = {};

    // The walk being noted: its start, and the last rbp it restored, not
    // yet used (at nullptr: the rbp it started with).
    uintptr_t noted_frame_ = 0;
    const uintptr_t* rbp_at_ = nullptr;
    uintptr_t rbp_value_ = 0;
    bool rbp_pending_ = false;

    void add_read(const uintptr_t* at, uintptr_t value)
    {
      if (reads_ < MAX_READS)
      {
        read_at_[reads_] = at;
        read_value_[reads_] = value;
      }
      reads_++;
    }

  public:
    // How many addresses the kept walk returned, and where they are (in
    // `frames`, not copied: they stay until this thread's next walk), if
    // it started at (frame, return_address, bp) asking for `max` and every
    // word it depended on is unchanged; otherwise 0.
    size_t replay(
      uintptr_t frame, uintptr_t return_address, uintptr_t bp, size_t max, const uintptr_t*& frames) const
    {
      if (frame != frame_ || return_address != return_address_ || max != max_ || (uses_bp_ && bp != bp_))
        return 0;
      for (size_t i = 0; i < reads_; i++)
      {
        if (*read_at_[i] != read_value_[i])
          return 0;
      }
      frames = frames_;
      return depth_;
    }

    // A walk from (frame, return_address, bp) asking for `max` begins:
    // forget the kept one, and note what it depends on from here on.
    void begin(uintptr_t frame, uintptr_t return_address, uintptr_t bp, size_t max)
    {
      frame_ = 0;
      return_address_ = return_address;
      bp_ = bp;
      uses_bp_ = false;
      max_ = max;
      reads_ = 0;
      noted_frame_ = frame;
      rbp_at_ = nullptr;
      rbp_pending_ = true;
    }

    // step_frames' note (see there).
    void return_address(const uintptr_t* at, uintptr_t value)
    {
      add_read(at, value);
    }

    void saved_rbp(const uintptr_t* at, uintptr_t value)
    {
      rbp_at_ = at;
      rbp_value_ = value;
      rbp_pending_ = true;
    }

    void rbp_used()
    {
      if (!rbp_pending_)
        return;
      rbp_pending_ = false;
      if (rbp_at_ == nullptr)
        uses_bp_ = true;
      else
        add_read(rbp_at_, rbp_value_);
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
