#pragma once
// Layer global: allocation labels, the C++ API.  A thread's allocations
// are labelled with the key/value pairs it has pushed and not yet popped;
// heap, allocs, peak and lifetime profiles carry them as pprof string
// labels (`go tool pprof -tagfocus=tenant=acme`).  Nestable: an inner
// label of the same key hides the outer one until popped.
//
//   push_label(key, value)  0; E2BIG when the set lost something (more
//                  than 8 labels, a key or value over 64 bytes, or the
//                  process's 65536 label sets used up), the push standing
//                  and to be popped; EINVAL, pushing nothing, for a null
//                  or empty key or a null value
//   pop_label()    0; EINVAL when nothing is pushed
//   ScopedLabel    pushes in its constructor, pops in its destructor (not
//                  when the push was refused)
//
// Without SNMALLOC_PROFILE they exist, keep nothing and return 0.

#include "config_profiler.h"

#include <cerrno>

namespace snmalloc::profile
{
  inline int push_label(const char* key, const char* value)
  {
    return Profiler::push_label(key, value);
  }

  inline int pop_label()
  {
    return Profiler::pop_label();
  }

  class ScopedLabel
  {
    bool pushed_;

  public:
    ScopedLabel(const char* key, const char* value) : pushed_(push_label(key, value) != EINVAL) {}

    ~ScopedLabel()
    {
      if (pushed_)
        pop_label();
    }

    ScopedLabel(const ScopedLabel&) = delete;
    ScopedLabel& operator=(const ScopedLabel&) = delete;
  };
} // namespace snmalloc::profile
