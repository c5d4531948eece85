#pragma once
// What atfork_allocates.c and its library share.
#include <stdatomic.h>

// Forks whose prepare, parent and child handler allocated and found its
// blocks intact (in a child: 1 once its handler ran).
extern atomic_int prepared, in_parent, in_child;

// Small, large and zeroed blocks, one grown, all freed, sized by `round`;
// whether their contents were as written.
int allocate_and_free(unsigned round);
