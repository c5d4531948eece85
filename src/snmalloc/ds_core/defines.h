#pragma once
// Layer ds_core: compiler markers shared by every layer.

#include <cstddef>
#include <cstdint>

// Fast paths are forced inline into their callers; slow paths are kept out of
// line so that the fast path's register pressure and code size stay small.
#define SNMALLOC_FAST_PATH inline __attribute__((always_inline))
#define SNMALLOC_SLOW_PATH __attribute__((noinline))
// A slow path that a fast path jumps to, which must be the same with and
// without profiling: GCC may clone a slow path for the constant arguments
// of one build and not the other (the plain shim's malloc jumped to a clone
// of alloc_slow without its `zero` argument, the profiling shim's to
// alloc_slow itself).  Clang clones no such function.
#ifdef __clang__
#  define SNMALLOC_FAST_PATH_EXIT SNMALLOC_SLOW_PATH
#else
#  define SNMALLOC_FAST_PATH_EXIT __attribute__((noinline, noclone))
#endif
// Code that runs once a process, at start-up or exit: kept with the other
// cold code, so that a short process faults in fewer pages of text.
#define SNMALLOC_ONCE_PATH __attribute__((noinline, cold))
// A static object built by the compiler, not by code at start-up: no
// constructor writes its pages and no guard is taken (C++17 has no
// constinit; both compilers have their own spelling).
#ifdef __clang__
#  define SNMALLOC_CONSTINIT [[clang::require_constant_initialization]]
#else
#  define SNMALLOC_CONSTINIT __constinit
#endif
#define SNMALLOC_LIKELY(x) __builtin_expect(!!(x), 1)
#define SNMALLOC_UNLIKELY(x) __builtin_expect(!!(x), 0)

// Entry points of the shim libraries (built with -fvisibility=hidden).
#define SNMALLOC_EXPORT __attribute__((visibility("default")))
