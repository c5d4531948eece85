#pragma once
// Layer profile/stacks, stage "record": an open-addressing hash index for the
// stack table's stacks and sites.
//
// Each slot is the entry's full hash beside one word naming it (a pointer
// or an id, never 0), so a probe compares hashes in the index's own line
// and reads an entry only when its hash matches, and growing moves slots
// without reading any entry: a new entry (nearly every sample on a
// workload of many requested sizes) touches one index line, not one cold
// entry line per probe.  Not locked (the owner's lock covers it); its
// memory comes straight from the OS.

#include "../base/profiler_regions.h"

#include <atomic>
#include <cstdint>

namespace snmalloc::profile
{
  class HashIndex
  {
    struct Slot
    {
      uint64_t hash;
      uintptr_t word; // 0: empty
    };

    Slot* slots_ = nullptr;
    size_t capacity_ = 0; // a power of two
    size_t count_ = 0;
    // slots_ and capacity_ - 1 again, for prefetch(), which runs without
    // the owner's lock: a pair read while grow() runs may mix the old
    // array and the new, and names a line of either or past the old one,
    // which a prefetch may (it never faults).
    std::atomic<Slot*> prefetch_slots_{nullptr};
    std::atomic<size_t> prefetch_mask_{0};

    bool grow(std::atomic<size_t>& os_bytes)
    {
      size_t capacity = capacity_ == 0 ? 4096 : capacity_ * 2;
      auto* slots = static_cast<Slot*>(profiler_regions.reserve(capacity * sizeof(Slot), "stack table"));
      if (slots == nullptr)
        return false;
      os_bytes.fetch_add(capacity * sizeof(Slot), std::memory_order_relaxed);
      for (size_t i = 0; i < capacity_; i++)
      {
        if (slots_[i].word == 0)
          continue;
        size_t j = slots_[i].hash & (capacity - 1);
        while (slots[j].word != 0)
          j = (j + 1) & (capacity - 1);
        slots[j] = slots_[i];
      }
      // The old array stays mapped (the PAL returns no address space); it
      // is half the new one's size, so all of them together are too.
      slots_ = slots;
      capacity_ = capacity;
      prefetch_slots_.store(slots, std::memory_order_relaxed);
      prefetch_mask_.store(capacity - 1, std::memory_order_relaxed);
      return true;
    }

  public:
    // Start loading the line where `hash` is looked for, ahead of the
    // probe; with or without the owner's lock.
    void prefetch(uint64_t hash) const
    {
      if (Slot* slots = prefetch_slots_.load(std::memory_order_relaxed))
        __builtin_prefetch(&slots[hash & prefetch_mask_.load(std::memory_order_relaxed)]);
    }

    // The word of the entry with this hash for which `same(word)` holds,
    // or, if there is none, `add()`'s word for a new one; 0 when `add`
    // fails or memory is exhausted.
    template<typename Same, typename Add>
    uintptr_t find_or_add(
      uint64_t hash, Same&& same, Add&& add, std::atomic<size_t>& os_bytes)
    {
      if ((count_ + 1) * 2 > capacity_ && !grow(os_bytes))
        return 0;
      size_t j = hash & (capacity_ - 1);
      for (; slots_[j].word != 0; j = (j + 1) & (capacity_ - 1))
      {
        if (slots_[j].hash == hash && same(slots_[j].word))
          return slots_[j].word;
      }
      uintptr_t word = add();
      if (word != 0)
      {
        slots_[j] = Slot{hash, word};
        count_++;
      }
      return word;
    }

    size_t count() const
    {
      return count_;
    }
  };
} // namespace snmalloc::profile
