#pragma once
// Umbrella of layer mem: slab metadata, free lists, the core allocator, the
// remote dealloc cache, the walk over every chunk.  Includes backend, ds, pal, ds_core.
#include "chunk_walk.h"
#include "core_alloc.h"
#include "profiler_contract.h"
