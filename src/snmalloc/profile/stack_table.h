#pragma once
// Layer profile, stage "record": the stack table.  Each distinct (stack,
// object size, requested size) is stored once and named by a small id; sample records
// carry the id, so a live sample costs tens of bytes however deep its stack.
// Each entry also accumulates the unbiased count and bytes of every
// allocation sampled there (the profile's alloc_objects / alloc_space).
//
// Entries are immortal, so ids and frame pointers stay valid for the life of
// the process (the raw sample stream hands them out).  The table's memory
// comes straight from the OS, never from malloc.

#include "stack_capture.h"

#include <cstring>
#include <sys/mman.h>

namespace snmalloc::profile
{
  struct StackEntry
  {
    uint64_t hash;
    uint64_t object_size;
    uint64_t requested_size;
    double alloc_objects;
    double alloc_bytes;
    uint32_t depth;
    uint32_t id;
    uintptr_t frames[1]; // `depth` of them
  };

  class StackTable
  {
    static constexpr size_t BLOCK = size_t(1) << 20;

    SpinLock lock_;
    StackEntry** slots_ = nullptr; // open addressing, power-of-two capacity
    size_t capacity_ = 0;
    StackEntry** by_id_ = nullptr;
    size_t count_ = 0;
    char* block_cursor_ = nullptr;
    char* block_end_ = nullptr;
    std::atomic<size_t> os_bytes_{0};

    void* os_alloc(size_t bytes)
    {
      void* p = Pal::reserve_lazy_rw(bytes);
      if (p != nullptr)
        os_bytes_.fetch_add(bytes, std::memory_order_relaxed);
      return p;
    }

    static uint64_t hash_of(const uintptr_t* frames, size_t depth, size_t size, size_t requested)
    {
      uint64_t h = (0x9E3779B97F4A7C15ULL ^ size) * 0xc4ceb9fe1a85ec53ULL ^ requested;
      for (size_t i = 0; i < depth; i++)
      {
        h ^= frames[i];
        h *= 0xff51afd7ed558ccdULL;
        h ^= h >> 32;
      }
      return h;
    }

    bool grow()
    {
      size_t new_capacity = capacity_ == 0 ? 4096 : capacity_ * 2;
      auto** slots = static_cast<StackEntry**>(os_alloc(new_capacity * sizeof(void*)));
      auto** by_id = static_cast<StackEntry**>(os_alloc(new_capacity * sizeof(void*)));
      if (slots == nullptr || by_id == nullptr)
        return false;
      for (size_t i = 0; i < count_; i++)
      {
        StackEntry* e = by_id_[i];
        size_t j = e->hash & (new_capacity - 1);
        while (slots[j] != nullptr)
          j = (j + 1) & (new_capacity - 1);
        slots[j] = e;
        by_id[i] = e;
      }
      // Old arrays are kept: a reader copying ids concurrently never sees
      // freed memory, and they are tiny next to the entries.
      slots_ = slots;
      by_id_ = by_id;
      capacity_ = new_capacity;
      return true;
    }

    StackEntry* new_entry(const uintptr_t* frames, size_t depth)
    {
      size_t bytes = bits::align_up(
        sizeof(StackEntry) + (depth ? depth - 1 : 0) * sizeof(uintptr_t), 16);
      if (block_cursor_ == nullptr || block_cursor_ + bytes > block_end_)
      {
        block_cursor_ = static_cast<char*>(os_alloc(BLOCK));
        if (block_cursor_ == nullptr)
          return nullptr;
        block_end_ = block_cursor_ + BLOCK;
      }
      auto* e = reinterpret_cast<StackEntry*>(block_cursor_);
      block_cursor_ += bytes;
      std::memcpy(e->frames, frames, depth * sizeof(uintptr_t));
      e->depth = uint32_t(depth);
      return e;
    }

  public:
    static constexpr uint32_t NO_ID = 0xffffffff;

    // Find or add the entry and count one sampled allocation of weight
    // `objects` and `bytes` on it.  NO_ID when out of memory.
    uint32_t record(
      const uintptr_t* frames,
      size_t depth,
      size_t object_size,
      size_t requested_size,
      double objects,
      double bytes)
    {
      uint64_t h = hash_of(frames, depth, object_size, requested_size);
      LockGuard g(lock_);
      if ((count_ + 1) * 2 > capacity_ && !grow())
        return NO_ID;
      size_t j = h & (capacity_ - 1);
      for (; slots_[j] != nullptr; j = (j + 1) & (capacity_ - 1))
      {
        StackEntry* e = slots_[j];
        if (
          e->hash == h && e->object_size == object_size &&
          e->requested_size == requested_size && e->depth == depth &&
          std::memcmp(e->frames, frames, depth * sizeof(uintptr_t)) == 0)
          break;
      }
      StackEntry* e = slots_[j];
      if (e == nullptr)
      {
        e = new_entry(frames, depth);
        if (e == nullptr)
          return NO_ID;
        e->hash = h;
        e->object_size = object_size;
        e->requested_size = requested_size;
        e->id = uint32_t(count_);
        slots_[j] = e;
        by_id_[count_++] = e;
      }
      e->alloc_objects += objects;
      e->alloc_bytes += bytes;
      return e->id;
    }

    // Address space taken from the OS (touched as entries fill it).
    size_t os_bytes() const
    {
      return os_bytes_.load(std::memory_order_relaxed);
    }

    const StackEntry* get(uint32_t id)
    {
      LockGuard g(lock_);
      return id < count_ ? by_id_[id] : nullptr;
    }

    // Copy every entry's pointer (entries are immortal) and the cumulative
    // counts as they are now, under the lock.
    template<typename F>
    void for_each(F&& f)
    {
      LockGuard g(lock_);
      for (size_t i = 0; i < count_; i++)
        f(*by_id_[i]);
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

  inline StackTable stack_table;
} // namespace snmalloc::profile
