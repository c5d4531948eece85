#pragma once
// Layer profile/guard: the free of a guarded slot's address, which ends a
// guarded sample or reports a double or invalid free with both stacks.

#include "../samples/sample_life.h"
#include "guard_report.h"

#include <cstring>

namespace snmalloc::profile
{
  // The stack of a free, allocator frames and all (the report cuts them
  // by name); none for a free the profiler itself makes.
  inline size_t capture_free_stack(uintptr_t* out, size_t max)
  {
    if (in_profiler)
      return 0;
    ProfilerGuard guard; // the unwinder may allocate
    return walk_current_stack(out, max);
  }

  // free() of an address in a guarded slot: a live guarded object is
  // unlisted, its pages protected and its slot quarantined, with the free
  // stack kept for a later use-after-free report; anything else is a
  // double or invalid free, reported with both stacks, then abort().
  SNMALLOC_SLOW_PATH inline void dealloc_guarded(GuardedSlot& slot, void* p)
  {
    uintptr_t frames[GuardedSlot::FREE_DEPTH];
    size_t depth = capture_free_stack(frames, GuardedSlot::FREE_DEPTH);
    SlotState state = slot.state.load(std::memory_order_acquire);
    uintptr_t a = reinterpret_cast<uintptr_t>(p);
    if (state != SlotState::Live || slot.object != a)
    {
      bool again = state == SlotState::Freed && slot.object == a;
      GuardDiagnosis d{
        again ? GuardFault::DoubleFree : GuardFault::InvalidFree,
        state == SlotState::Free ? nullptr : &slot,
        a};
      write_guard_report(d, "", frames, depth);
      ::abort();
    }
    lifetime_table.freed(lifetime_end(&slot.record));
    unlist(&slot.record);
    std::memcpy(slot.free_frames, frames, depth * sizeof(uintptr_t));
    slot.free_depth = uint32_t(depth);
    slot.free_thread = this_thread_id();
    guarded_slots.dealloc(slot);
  }
} // namespace snmalloc::profile
