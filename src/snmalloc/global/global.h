#pragma once
// Umbrella of layer global: thread-local allocators, the allocator pool,
// thread exit and fork handling, and the C++ front (alloc, dealloc,
// alloc_size, aligned variants), the heap statistics (stats.h), the census
// (heap_walk.h), the checks build's sweep of freed objects (freed_sweep.h)
// and the allocation labels' C++ API (labels.h).
#include "api.h"
#include "freed_sweep.h"
#include "heap_walk.h"
#include "labels.h"
#include "stats.h"
