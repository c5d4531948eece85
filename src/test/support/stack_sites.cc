// Real call sites in the test binary (stack_sites.h). Each site's call and
// its __LINE__ sit on one line, so the line is the one debug info gives for
// the call. The lines differ, so no two sites have identical code (which
// identical code folding would merge), and setting the line after the call
// keeps it from being a tail call (which would return into the site's
// caller instead).

#include "support/stack_sites.h"

namespace
{
  __attribute__((noinline)) uintptr_t caller_return_address()
  {
    return reinterpret_cast<uintptr_t>(__builtin_return_address(0));
  }

  __attribute__((noinline)) CallSite pprof_static_site()
  {
    return {caller_return_address(), __LINE__};
  }
}

__attribute__((noinline)) CallSite pprof_site_leaf()
{
  return {caller_return_address(), __LINE__};
}

__attribute__((noinline)) CallSite pprof_site_middle()
{
  return {caller_return_address(), __LINE__};
}

__attribute__((noinline)) CallSite pprof_site_root()
{
  return {caller_return_address(), __LINE__};
}

namespace snmalloc
{
  __attribute__((noinline)) CallSite pprof_test_allocator_frame()
  {
    return {caller_return_address(), __LINE__};
  }
}

namespace snmalloc_test
{
  CallSite call_site_in_pprof_static_site()
  {
    return pprof_static_site();
  }
}
