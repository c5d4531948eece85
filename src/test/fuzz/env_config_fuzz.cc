// libFuzzer target: the SNMALLOC_PROFILE parser, fed any text.  It must
// either accept it into a valid configuration or reject it, never crash,
// read out of bounds or leave the path unterminated.
#include <snmalloc/profile/config/env_config.h>

#include <cstdint>
#include <cstring>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
  std::string text(reinterpret_cast<const char*>(data), size); // stops at a NUL
  snmalloc::profile::EnvConfig config;
  if (snmalloc::profile::parse_env_config(text.c_str(), config))
  {
    if (config.depth == 0 || config.depth > snmalloc::profile::MAX_DEPTH ||
        std::memchr(config.path.c_str(), '\0', snmalloc::profile::PATH_CAPACITY) == nullptr)
      __builtin_trap();
  }
  return 0;
}
