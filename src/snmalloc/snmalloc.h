#pragma once
// The umbrella header: the allocator's C++ API (snmalloc::alloc, dealloc,
// alloc_size, alloc_aligned, reallocate), the statistics and the heap
// census (snmalloc::stats, snmalloc::heap_walk) and, in profiling builds,
// snmalloc::profile::{start, stop, is_active, dump}.
#include "global/global.h"

namespace snmalloc::detail
{
  // A program that uses snmalloc as a library (its malloc stays libc's) may
  // start threads before anything touches the allocator, and one that
  // takes a lock without attaching (trim(), stats()) would not run the
  // setup first: it runs at load.  The shims need not (it would cost the
  // profiling shim's start-up about 8 page faults): their malloc's first
  // call, made before any second thread exists (pthread_create allocates),
  // runs it.
  inline const bool process_set_up_at_load = (process_setup(), true);
} // namespace snmalloc::detail
