#pragma once
// Layer override: the allocator's fork handlers registered before every
// other, so that fork() takes its locks after all other prepare handlers
// have run and gives them back before any other parent or child handler,
// as glibc's malloc does (it locks inside fork(), after the handlers).
//
// pthread_atfork runs prepare handlers in the reverse order of their
// registration.  A library's constructor runs before a preloaded shim's
// first allocation (which registers the allocator's handlers otherwise),
// so a prepare handler it registers would run while the fork holds the
// allocator's locks; if it takes a lock of its own that another thread
// holds while it waits in malloc for one of the allocator's, neither
// moves (func-preload-atfork-allocates hung in each of 3 runs).  Every
// registration reaches __register_atfork, glibc's exported function
// behind the pthread_atfork that callers link statically (from
// libc_nonshared.a): the shim defines it, registers the allocator's
// handlers at the first call and passes the caller's on.

#include "../ds/fork_locks.h"

#include <atomic>
#include <cerrno>
#include <dlfcn.h>

#if defined(__GLIBC__)
extern "C" SNMALLOC_EXPORT int
__register_atfork(void (*prepare)(), void (*in_parent)(), void (*in_child)(), void* dso_handle)
{
  using Register = int (*)(void (*)(), void (*)(), void (*)(), void*);
  // Comes back here when it registers the allocator's handlers: to glibc.
  snmalloc::fork_locks.register_once();
  static std::atomic<Register> glibc_register{nullptr};
  Register next = glibc_register.load(std::memory_order_acquire);
  if (next == nullptr)
  {
    next = reinterpret_cast<Register>(::dlsym(RTLD_NEXT, "__register_atfork"));
    if (next == nullptr)
      return ENOSYS;
    glibc_register.store(next, std::memory_order_release);
  }
  return next(prepare, in_parent, in_child, dso_handle);
}
#endif
