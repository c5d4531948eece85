#include "support/profiling.h"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <malloc.h>

namespace snmalloc_test
{
  ProfilingAt::ProfilingAt(size_t interval)
  {
    REQUIRE(snmalloc::profile::start(interval) == 0);
    REQUIRE(snmalloc::profile::is_active());
  }

  ProfilingAt::ProfilingAt(snmalloc::profile::SampleMode mode, size_t rate)
  {
    REQUIRE(snmalloc::profile::start(mode, rate) == 0);
    REQUIRE(snmalloc::profile::is_active());
    REQUIRE(snmalloc::profile::mode() == mode);
  }

  ProfilingAt::~ProfilingAt()
  {
    snmalloc::profile::stop();
  }

  StackSourceScope::StackSourceScope(snmalloc::profile::StackSource source)
  {
    snmalloc::profile::set_stack_source(source);
  }

  StackSourceScope::~StackSourceScope()
  {
    snmalloc::profile::set_stack_source(nullptr);
  }

  size_t usable_size_unsampled(size_t size, size_t alignment)
  {
    REQUIRE_FALSE(snmalloc::profile::is_active());
    void* p = alignment == 0 ? std::malloc(size) : aligned_alloc(alignment, size);
    REQUIRE(p != nullptr);
    size_t usable = malloc_usable_size(p);
    std::free(p);
    REQUIRE(usable >= size);
    return usable;
  }

  void dump_or_fail(const std::string& path)
  {
    snmalloc::profile::DumpResult result = snmalloc::profile::dump(path.c_str());
    INFO("dump(" << path << "): " << result.message());
    REQUIRE(result.ok());
  }
} // namespace snmalloc_test
