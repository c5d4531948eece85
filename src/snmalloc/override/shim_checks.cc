// Layer override: the one translation unit of the checks shims
// (libsnmallocshim-checks.so, and the others in a SNMALLOC_CHECKS build):
// the shim's entry points, the bounds-checked copies and the sweep of freed
// objects at exit.
#include "checked_copies.h"
#include "exit_sweep.h"
#include "shim.cc"
