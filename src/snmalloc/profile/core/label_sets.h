#pragma once
// Layer profile/core: allocation labels, the key/value pairs a thread sets
// (tenant=acme) for the allocations it makes until it removes them; here
// the process's interned sets of them (a thread's stack of labels is
// thread_labels.h).
//
// Every set of labels a sample was ever taken under is interned once, as a
// node that adds one label to its parent set, so a set is a 32-bit id,
// found by (parent, key, value) under a lock.  A sample copies its thread's
// set id into its site (the stack table keys sites by it), so its labels
// live as long as its record, whichever thread frees it and whether or not
// the allocating one still runs.
//
// Bounded: at most MAX_LABEL_KEYS labels in a set, keys and values cut to
// MAX_LABEL_TEXT bytes, and MAX_LABEL_SETS sets in a process (a label past
// them adds nothing).  A set that lost anything that way carries
// LABELS_TRUNCATED in its id, and a profile says how many samples were
// taken under such sets.
//
// Nodes are immortal and never change once made, and their memory comes
// from the OS (interning runs inside a sample, where malloc must not
// recurse).

#include "settings.h"

#include <cstring>
#include <string_view>

namespace snmalloc::profile
{
  inline constexpr size_t MAX_LABEL_KEYS = 8;
  inline constexpr size_t MAX_LABEL_TEXT = 64;
  inline constexpr size_t MAX_LABEL_SETS = size_t(1) << 16;
  // Set in a set's id when labels were cut or left out of it.
  inline constexpr uint32_t LABELS_TRUNCATED = uint32_t(1) << 31;
  // The set of no labels.
  inline constexpr uint32_t NO_LABELS = 0;

  struct LabelNode
  {
    uint32_t parent;
    uint8_t key_length;
    uint8_t value_length;
    char key[MAX_LABEL_TEXT];
    char value[MAX_LABEL_TEXT];

    std::string_view key_text() const
    {
      return {key, key_length};
    }

    std::string_view value_text() const
    {
      return {value, value_length};
    }
  };

  class LabelSets
  {
    // Open addressing, twice as many slots as sets: node id or 0 (free).
    static constexpr size_t INDEX_SLOTS = MAX_LABEL_SETS * 2;

    SpinLock lock_;
    LabelNode* nodes_ = nullptr; // node 0, the empty set, is never read
    uint32_t* index_ = nullptr;
    uint32_t count_ = 1;
    std::atomic<uint64_t> truncated_samples_{0};

    static uint64_t hash(uint32_t parent, std::string_view key, std::string_view value)
    {
      uint64_t h = 0xcbf29ce484222325ULL ^ parent;
      for (char c : key)
        h = (h ^ uint8_t(c)) * 0x100000001b3ULL;
      h = (h ^ 0xff) * 0x100000001b3ULL; // "ab"="c" is not "a"="bc"
      for (char c : value)
        h = (h ^ uint8_t(c)) * 0x100000001b3ULL;
      return h ^ (h >> 31);
    }

    bool reserve()
    {
      if (nodes_ != nullptr)
        return true;
      auto* nodes = static_cast<LabelNode*>(Pal::reserve_lazy_rw(MAX_LABEL_SETS * sizeof(LabelNode)));
      auto* index = static_cast<uint32_t*>(Pal::reserve_lazy_rw(INDEX_SLOTS * sizeof(uint32_t)));
      if (nodes == nullptr || index == nullptr)
        return false; // the one that was had stays unused
      nodes_ = nodes;
      index_ = index;
      return true;
    }

    bool matches(uint32_t id, uint32_t parent, std::string_view key, std::string_view value) const
    {
      const LabelNode& n = nodes_[id];
      return n.parent == parent && n.key_text() == key && n.value_text() == value;
    }

  public:
    // The set `parent` (of fewer than MAX_LABEL_KEYS labels, its id
    // without LABELS_TRUNCATED) with key=value added, both cut to
    // MAX_LABEL_TEXT bytes; with LABELS_TRUNCATED when this label was cut,
    // or left out for want of room (then it is `parent`).
    uint32_t with(uint32_t parent, std::string_view key, std::string_view value)
    {
      uint32_t truncated = 0;
      if (key.size() > MAX_LABEL_TEXT || value.size() > MAX_LABEL_TEXT)
      {
        truncated = LABELS_TRUNCATED;
        key = key.substr(0, MAX_LABEL_TEXT);
        value = value.substr(0, MAX_LABEL_TEXT);
      }
      LockGuard g(lock_);
      if (!reserve())
        return parent | LABELS_TRUNCATED;
      size_t slot = hash(parent, key, value) & (INDEX_SLOTS - 1);
      for (;; slot = (slot + 1) & (INDEX_SLOTS - 1))
      {
        uint32_t id = index_[slot];
        if (id == 0)
          break;
        if (matches(id, parent, key, value))
          return id | truncated;
      }
      if (count_ == MAX_LABEL_SETS)
        return parent | LABELS_TRUNCATED;
      uint32_t id = count_++;
      LabelNode& n = nodes_[id];
      n.parent = parent;
      n.key_length = uint8_t(key.size());
      n.value_length = uint8_t(value.size());
      std::memcpy(n.key, key.data(), key.size());
      std::memcpy(n.value, value.data(), value.size());
      index_[slot] = id;
      return id | truncated;
    }

    // f(key, value) for each label of set `id`, innermost first, a key
    // once (an inner label hides an outer one of the same key, as a
    // nested scope does).  Without the lock, so that f may allocate: a
    // node never changes once made, and an id reaches a reader through
    // the stack table's lock, taken after the node was made.
    template<typename F>
    void for_each_label(uint32_t id, F&& f) const
    {
      std::string_view seen[MAX_LABEL_KEYS];
      size_t count = 0;
      for (id &= ~LABELS_TRUNCATED; id != NO_LABELS; id = nodes_[id].parent)
      {
        std::string_view key = nodes_[id].key_text();
        bool hidden = false;
        for (size_t i = 0; i < count; i++)
          hidden |= seen[i] == key;
        if (hidden)
          continue;
        seen[count++] = key;
        f(key, nodes_[id].value_text());
      }
    }

    // A sample was taken under a set with LABELS_TRUNCATED.
    void count_truncated_sample()
    {
      truncated_samples_.fetch_add(1, std::memory_order_relaxed);
    }

    uint64_t truncated_samples() const
    {
      return truncated_samples_.load(std::memory_order_relaxed);
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

  inline LabelSets label_sets;
} // namespace snmalloc::profile
