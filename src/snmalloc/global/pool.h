#pragma once
// Layer global: the pool of allocators.  A thread takes one on its first
// slow path and gives it back at exit, with everything it still owns (live
// objects' slabs, and when profiling, its sample list), so the next thread
// reuses it.  Allocators are never destroyed; `all` lists every one of them
// for whoever must visit them (the profiler's dump).

#include "../mem/mem.h"

namespace snmalloc
{
  template<typename Core>
  class AllocPool
  {
    SpinLock lock_;
    Core* free_ = nullptr;
    std::atomic<Core*> all_{nullptr};

  public:
    Core* acquire() noexcept
    {
      {
        LockGuard g(lock_);
        if (Core* c = free_)
        {
          free_ = c->next_in_pool;
          c->next_in_pool = nullptr;
          return c;
        }
      }
      void* mem = backend.alloc_meta(sizeof(Core));
      if (mem == nullptr)
        report_fatal("out of memory creating a thread allocator");
      Core* c = new (mem) Core(reinterpret_cast<uintptr_t>(mem));
      Core* head = all_.load(std::memory_order_relaxed);
      do
      {
        c->next_in_all = head;
      } while (!all_.compare_exchange_weak(
        head, c, std::memory_order_release, std::memory_order_relaxed));
      return c;
    }

    void release(Core* c) noexcept
    {
      LockGuard g(lock_);
      c->next_in_pool = free_;
      free_ = c;
    }

    template<typename F>
    void for_each(F&& f)
    {
      for (Core* c = all_.load(std::memory_order_acquire); c != nullptr;
           c = c->next_in_all)
        f(*c);
    }

    void prefork() noexcept
    {
      lock_.lock();
    }

    void postfork() noexcept
    {
      lock_.unlock();
    }
  };
} // namespace snmalloc
