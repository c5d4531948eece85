#pragma once
// Layer profile/core: a thread's allocation labels, the stack of key/value
// pairs it has pushed and not yet popped.
//
// A push and a pop are a few stores and no lock: a push keeps the caller's
// two pointers, not their text, so the caller keeps both valid and
// unchanged until the matching pop.  The set they make is interned
// (label_sets.h) only when a sample is taken on this thread, a level at a
// time, each level's set id kept: a sample under an unchanged set, or
// under a level popped back to, interns nothing, and pushes and pops
// between two samples intern nothing however many there are.  Interning at
// the push instead took 252 instructions a push and pop (a hashed lookup
// under a lock), against 13 now inlined and 41 through the C functions.
//
// Bounded as a set is (label_sets.h): the depth is known at a push, which
// refuses to keep a level past MAX_LABEL_KEYS (E2BIG, still to be popped);
// a key or value over MAX_LABEL_TEXT bytes, or the process's sets used up,
// is found at the interning, and only the profile's truncation count says
// so.

#include "label_sets.h"

#include <cerrno>
#include <cstring>

namespace snmalloc::profile
{
  class ThreadLabels
  {
    // Pushes not yet popped, those past MAX_LABEL_KEYS included.
    uint32_t depth_ = 0;
    // Levels whose set is in sets_: sets_[i] is the set of the first i
    // levels for every i <= interned_ (and <= depth_; a pop leaves it
    // above, a push brings it down to the level it replaces).
    uint32_t interned_ = 0;
    const char* keys_[MAX_LABEL_KEYS] = {};
    const char* values_[MAX_LABEL_KEYS] = {};
    uint32_t sets_[MAX_LABEL_KEYS + 1] = {NO_LABELS};

    static std::string_view bounded_text(const char* text)
    {
      // One byte past the bound, so that a text over it is seen and cut.
      return {text, strnlen(text, MAX_LABEL_TEXT + 1)};
    }

    // A sample found levels pushed since the last one interned.
    SNMALLOC_SLOW_PATH void intern_pushed_levels(uint32_t levels)
    {
      for (uint32_t i = interned_; i < levels; i++)
      {
        uint32_t below = sets_[i];
        uint32_t added = label_sets.with(
          below & ~LABELS_TRUNCATED, bounded_text(keys_[i]), bounded_text(values_[i]));
        sets_[i + 1] = added | (below & LABELS_TRUNCATED);
      }
      interned_ = levels;
    }

  public:
    // 0; E2BIG when past MAX_LABEL_KEYS labels (the push adds nothing,
    // but stands, to be popped as any other); EINVAL, pushing nothing,
    // for a null or empty key or a null value.
    int push(const char* key, const char* value)
    {
      if (key == nullptr || *key == '\0' || value == nullptr)
        return EINVAL;
      uint32_t level = depth_++;
      if (level >= MAX_LABEL_KEYS)
        return E2BIG;
      keys_[level] = key;
      values_[level] = value;
      if (interned_ > level)
        interned_ = level;
      return 0;
    }

    // 0, or EINVAL when nothing is pushed.
    int pop()
    {
      if (depth_ == 0)
        return EINVAL;
      depth_--;
      return 0;
    }

    // The id of the set in force, interned now if it changed since the
    // last sample.  For a sample on this thread only.
    uint32_t current_set()
    {
      uint32_t levels = depth_ < MAX_LABEL_KEYS ? depth_ : uint32_t(MAX_LABEL_KEYS);
      if (SNMALLOC_UNLIKELY(interned_ < levels))
        intern_pushed_levels(levels);
      return sets_[levels] | (depth_ > MAX_LABEL_KEYS ? LABELS_TRUNCATED : 0);
    }
  };

  inline thread_local ThreadLabels thread_labels;
} // namespace snmalloc::profile
