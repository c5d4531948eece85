// Real call sites in the test executable (stack_sites.cc, built with -g so
// pprof and the symbolizer find their names and lines), to use as stack
// frames in profiles encoded by hand.
#pragma once

#include <cstdint>

// A return address in this binary and the source line of its call.
struct CallSite
{
  uintptr_t return_address;
  int line;
};

// Each returns a call site inside itself.
CallSite pprof_site_leaf();
CallSite pprof_site_middle();
CallSite pprof_site_root();

namespace snmalloc
{
  // Stands for an allocator frame: its name matches the drop_frames regex.
  CallSite pprof_test_allocator_frame();
}

namespace snmalloc_test
{
  // A call site inside a function with internal linkage (which dladdr
  // cannot name).
  CallSite call_site_in_pprof_static_site();
}
