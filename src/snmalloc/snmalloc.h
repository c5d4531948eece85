#pragma once
// The umbrella header: the allocator's C++ API (snmalloc::alloc, dealloc,
// alloc_size, alloc_aligned, reallocate), the statistics and the heap
// census (snmalloc::stats, snmalloc::heap_walk) and, in profiling builds,
// snmalloc::profile::{start, stop, is_active, dump}.
#include "global/global.h"
