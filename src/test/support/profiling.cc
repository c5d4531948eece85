#include "support/profiling.h"

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <malloc.h>
#include <sstream>

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

  std::string test_setting(size_t i)
  {
    const char* setting = std::getenv("PROFILE_TEST_SETTING");
    if (setting == nullptr)
      return "";
    std::istringstream words(setting);
    std::string word;
    for (size_t n = 0; n <= i; n++)
    {
      if (!(words >> word))
      {
        std::fprintf(stderr,
          "PROFILE_TEST_SETTING=\"%s\" has no word %zu\n", setting, i);
        std::exit(2);
      }
    }
    return word;
  }

  size_t test_setting_number(size_t i)
  {
    std::string text = test_setting(i);
    if (text.empty())
      return 0;
    char* end = nullptr;
    unsigned long long value = std::strtoull(text.c_str(), &end, 10);
    if (*end != '\0' || value == 0)
    {
      std::fprintf(stderr, "PROFILE_TEST_SETTING: word %zu, %s, is not a positive number\n", i, text.c_str());
      std::exit(2);
    }
    return size_t(value);
  }

  void require_test_setting()
  {
    INFO("PROFILE_TEST_SETTING is unset: this test runs at the settings ctest gives it");
    REQUIRE(std::getenv("PROFILE_TEST_SETTING") != nullptr);
  }

  void dump_or_fail(const std::string& path)
  {
    snmalloc::profile::DumpResult result = snmalloc::profile::dump(path.c_str());
    INFO("dump(" << path << "): " << result.message());
    REQUIRE(result.ok());
  }
} // namespace snmalloc_test
