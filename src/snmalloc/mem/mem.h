#pragma once
// Umbrella of layer mem: slab metadata, free lists, the core allocator, the
// remote dealloc cache.  Includes backend, ds, pal, ds_core.
#include "core_alloc.h"
#include "profiler_contract.h"
