#pragma once
// Layer global: allocation labels, the C++ API.  A thread's allocations
// are labelled with the key/value pairs it has pushed and not yet popped;
// heap, allocs, peak and lifetime profiles carry them as pprof string
// labels (`go tool pprof -tagfocus=tenant=acme`).  Nestable: an inner
// label of the same key hides the outer one until popped.
//
//   push_label(key, value)  0; E2BIG past 8 labels (the push adds
//                  nothing but stands, to be popped); EINVAL, pushing
//                  nothing, for a null or empty key or a null value.  Key
//                  and value are kept as pointers, not copied: both must
//                  stay valid and unchanged until the matching pop.  A key
//                  or value over 64 bytes is cut, and the process's 65536
//                  label sets used up adds nothing, found at the next
//                  sample: the push returns 0 and the profile's truncation
//                  count says so.
//   pop_label()    0; EINVAL when nothing is pushed
//   ScopedLabel    pushes in its constructor, pops in its destructor (not
//                  when the push was refused); its strings must outlive it
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
