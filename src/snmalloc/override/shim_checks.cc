// Layer override: the one translation unit of the checks shims
// (libsnmallocshim-checks.so, and the others in a SNMALLOC_CHECKS build):
// the shim's entry points and the bounds-checked copies.
#include "checked_copies.h"
#include "shim.cc"
