#pragma once
// Layer mem: zero-size allocations.  malloc(0), new of 0 bytes, calloc(0,
// n), realloc(nullptr, 0) and the aligned forms at the default alignment
// return a unique 16-byte aligned address in a few chunks kept
// inaccessible, so any read or write through it faults at once instead of
// reaching a 16-byte object's bytes (or, past them, a free neighbour's
// link).  Off every fast path: size 0 already takes malloc's slow path,
// and the chunks' pagemap tag (ChunkKind::Zero) sends their frees to
// dealloc_slow.  A slot is a bit, set while handed out; a free of a slot
// whose bit is clear is a double free.  When every slot is out, or while
// the chunks are being made by another thread, or if they cannot be had, a
// zero-size allocation is an ordinary 16-byte one.  The checks build keeps
// those always: its bounds-checked copies name the bytes read or written
// past a zero-size allocation, which a fault does not.

#include "../backend/backend.h"
#include "bad_free.h"

#include <atomic>

namespace snmalloc
{
  class ZeroSizeSlots
  {
  public:
    // 4096 slots: a program holding more zero-size allocations at once gets
    // ordinary ones for the rest.
    static constexpr size_t BYTES = 4 * config::CHUNK_SIZE;
    static constexpr size_t SLOTS = BYTES / config::MIN_ALLOC_SIZE;

  private:
    static constexpr size_t WORDS = SLOTS / 64;

    enum State : int
    {
      NotMade,
      Making,
      Ready,
      Failed,
    };

    std::atomic<int> state_{NotMade};
    uintptr_t base_ = 0; // published by state_ becoming Ready
    std::atomic<size_t> hint_{0}; // a word last seen with a clear bit
    std::atomic<uint64_t> out_[WORDS] = {};

    // The chunks, made by the first thread to ask; the others meanwhile get
    // ordinary objects (no lock: nothing to hold across fork()).
    bool ready()
    {
      int state = state_.load(std::memory_order_acquire);
      if (SNMALLOC_LIKELY(state == Ready))
        return true;
      if (state != NotMade || !state_.compare_exchange_strong(state, Making))
        return false;
      Backend::Chunks c = backend.alloc_chunks(BYTES, config::CHUNK_SIZE);
      if (c.base == nullptr || !Pal::make_inaccessible(c.base, BYTES))
      {
        state_.store(Failed, std::memory_order_release);
        return false;
      }
      set_chunk_entries(c.base, BYTES, make_tag(ChunkKind::Zero, 0), 0);
      base_ = reinterpret_cast<uintptr_t>(c.base);
      state_.store(Ready, std::memory_order_release);
      return true;
    }

  public:
    // A unique address no byte of which may be accessed; nullptr when there
    // is none to give (the caller allocates an ordinary object).
    SNMALLOC_SLOW_PATH void* alloc()
    {
      if (!ready())
        return nullptr;
      size_t first = hint_.load(std::memory_order_relaxed);
      for (size_t i = 0; i < WORDS; i++)
      {
        size_t w = (first + i) % WORDS;
        uint64_t bits = out_[w].load(std::memory_order_relaxed);
        while (bits != ~uint64_t(0))
        {
          uint64_t lowest_clear = ~bits & (bits + 1);
          if (out_[w].compare_exchange_weak(bits, bits | lowest_clear, std::memory_order_relaxed))
          {
            hint_.store(w, std::memory_order_relaxed);
            size_t slot = w * 64 + size_t(__builtin_ctzll(lowest_clear));
            return reinterpret_cast<void*>(base_ + slot * config::MIN_ALLOC_SIZE);
          }
        }
      }
      return nullptr;
    }

    // p is in the chunks (their pagemap tag says so).
    SNMALLOC_SLOW_PATH void dealloc(void* p)
    {
      uintptr_t offset = reinterpret_cast<uintptr_t>(p) - base_;
      if (offset % config::MIN_ALLOC_SIZE != 0)
        report_bad_free(BadFree::Interior, p);
      size_t slot = offset / config::MIN_ALLOC_SIZE;
      uint64_t bit = uint64_t(1) << (slot % 64);
      if ((out_[slot / 64].fetch_and(~bit, std::memory_order_relaxed) & bit) == 0)
        report_bad_free(BadFree::DoubleFree, p);
    }

    // Apply f to the address of each slot handed out and not freed, as of
    // the moment its word is read.
    template<typename F>
    void for_each_out(F&& f) const
    {
      if (state_.load(std::memory_order_acquire) != Ready)
        return;
      for (size_t w = 0; w < WORDS; w++)
      {
        for (uint64_t bits = out_[w].load(std::memory_order_relaxed); bits != 0; bits &= bits - 1)
        {
          size_t slot = w * 64 + size_t(__builtin_ctzll(bits));
          f(reinterpret_cast<void*>(base_ + slot * config::MIN_ALLOC_SIZE));
        }
      }
    }

    // Is p one of the slots' addresses?
    bool holds(const void* p) const
    {
      return state_.load(std::memory_order_acquire) == Ready &&
        reinterpret_cast<uintptr_t>(p) - base_ < BYTES;
    }
  };

  inline ZeroSizeSlots zero_size_slots;
} // namespace snmalloc
