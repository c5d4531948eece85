#pragma once
// Layer mem: the per-thread part of an allocator: what the fast paths touch.
//
// It lives in thread-local storage and is all zeros before the thread's
// first slow path (no constructor, so no TLS guard on the fast path): an
// empty fast list and an owner that matches no pagemap entry send the first
// malloc and free to their slow paths, which attach an allocator.

#include "../ds/ds.h"

namespace snmalloc
{
  template<typename Core>
  struct LocalCache
  {
    // Objects ready to hand out, per sizeclass, all from one slab each.
    FreeObject* fast[NUM_SMALL_CLASSES];
    // The attached allocator; its address is the owner value in the pagemap.
    Core* core;
    // Set once the thread's teardown has run; later calls use a borrowed
    // allocator for the one operation.
    bool torn_down;
  };
} // namespace snmalloc
