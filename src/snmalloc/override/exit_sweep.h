#pragma once
// Layer override: the checks shims' sweep of freed objects at exit
// (global/freed_sweep.h).  Registered when the library is loaded, before
// the program's own exit handlers and static destructors, so it runs after
// them and sees what they free.  (A program built with the header-only C++
// API in a checks configuration has no sweep at exit.)

#include "../global/freed_sweep.h"

#include <cstdlib>

__attribute__((constructor)) static void snmalloc_register_exit_sweep()
{
  // Without the registration (atexit fails only when out of memory) the
  // checks still run at every reuse and slab release.
  (void)std::atexit([] { snmalloc::detail::sweep_freed_objects(); });
}
