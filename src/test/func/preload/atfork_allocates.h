#pragma once
// What atfork_allocates.c and its library share.
#include <pthread.h>
#include <stdatomic.h>

// Forks whose prepare, parent and child handler allocated and found its
// blocks intact (in a child: 1 once its handler ran).
extern atomic_int prepared, in_parent, in_child;

// The library's own lock, which its fork handlers hold across fork() (as a
// library guards its state) and which the program's threads hold while
// they allocate.
extern pthread_mutex_t library_lock;

// Small, large and zeroed blocks, one grown, all freed, sized by `round`;
// whether their contents were as written.
int allocate_and_free(unsigned round);
