#pragma once
// Layer global: the pool of allocators.  A thread takes one on its first
// slow path and gives it back at exit, with everything it still owns (live
// objects' slabs, and when profiling, its sample list), so the next thread
// reuses it.  Allocators are never destroyed.

#include "../mem/mem.h"

namespace snmalloc
{
  template<typename Core>
  class AllocPool
  {
    SpinLock lock_;
    Core* free_ = nullptr;

  public:
    // A pooled allocator, else a new one; nullptr when memory is exhausted.
    Core* acquire() noexcept
    {
      {
        LockGuard g(lock_);
        if (Core* c = free_)
        {
          free_ = c->next_in_pool;
          c->next_in_pool = nullptr;
          c->in_pool = false;
          return c;
        }
      }
      void* mem = backend.alloc_meta(sizeof(Core));
      if (mem == nullptr)
        return nullptr; // out of memory: the caller's call fails
      return new (mem) Core(reinterpret_cast<uintptr_t>(mem));
    }

    void release(Core* c) noexcept
    {
      LockGuard g(lock_);
      c->next_in_pool = free_;
      c->in_pool = true;
      free_ = c;
    }

    // Apply f to each allocator no thread holds, under the lock, so that
    // none is taken meanwhile.
    template<typename F>
    void for_each_idle(F&& f) noexcept
    {
      LockGuard g(lock_);
      for (Core* c = free_; c != nullptr; c = c->next_in_pool)
        f(*c);
    }

    // Apply f(first idle allocator) under the lock: none joins or leaves
    // the pool until it returns (in_pool says which are in it).
    template<typename F>
    void while_locked(F&& f) noexcept
    {
      LockGuard g(lock_);
      f(free_);
    }

    // See SpinLock::free_within.
    bool lock_free_within(unsigned tries) noexcept
    {
      return lock_.free_within(tries);
    }

    void prefork() noexcept
    {
      lock_.hold_for_fork();
    }

    void postfork() noexcept
    {
      lock_.release_after_fork();
    }
  };
} // namespace snmalloc
