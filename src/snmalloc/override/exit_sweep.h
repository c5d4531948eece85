#pragma once
// Layer override: the checks shims' sweep of freed objects at exit
// (global/freed_sweep.h), as late as exit allows.  Registered when the
// library is loaded, for no library (a null handle): exit runs such
// handlers in reverse order of registration, and from a preloaded shim
// this one comes before the dynamic loader's, which runs every library's
// destructors, so it runs after them and sees what they free.  (atexit
// from a library names that library, whose own teardown then runs it,
// before libraries loaded after it: their static destructors' writes were
// missed.)  A shim linked into the program registers after the loader and
// runs before library destructors.  A program built with the header-only
// C++ API in a checks configuration has no sweep at exit.

#include "../global/freed_sweep.h"

extern "C" int __cxa_atexit(void (*f)(void*), void* arg, void* dso_handle);

__attribute__((constructor)) static void snmalloc_register_exit_sweep()
{
  // Without the registration (it fails only when out of memory) the checks
  // still run at every reuse.
  (void)__cxa_atexit([](void*) { snmalloc::detail::sweep_freed_objects(); }, nullptr, nullptr);
}
