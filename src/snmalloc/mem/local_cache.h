#pragma once
// Layer mem: the per-thread part of an allocator: what the fast paths touch.
//
// It lives in thread-local storage and is constant-initialised (so there is
// no TLS guard on the fast path): empty fast lists and an owner value that
// no pagemap entry holds send the first malloc and free to their slow paths,
// which attach an allocator.

#include "../ds/ds.h"

namespace snmalloc
{
  // The owner value of a thread with no allocator: odd like a tag, with a
  // kind no chunk has.  Not 0: unowned chunks (a large block's tail, a freed
  // block) have owner 0, and a free of one must not take the fast path.
  constexpr uintptr_t NO_OWNER = ~uintptr_t(0);

  template<typename Core>
  struct LocalCache
  {
    // Objects ready to hand out, per sizeclass, all from one slab each.
    FreeObject* fast[NUM_SMALL_CLASSES] = {};
    // What the pagemap says for chunks of the attached allocator: the free
    // fast path compares with this, never with `core`.
    uintptr_t owner = NO_OWNER;
    // The attached allocator.
    Core* core = nullptr;
    // Set once the thread's teardown has run; later calls use a borrowed
    // allocator for the one operation.
    bool torn_down = false;

    void attach(Core* c)
    {
      core = c;
      owner = c->owner_value();
    }

    void detach()
    {
      core = nullptr;
      owner = NO_OWNER;
    }
  };
} // namespace snmalloc
