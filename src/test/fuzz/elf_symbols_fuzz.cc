// libFuzzer target: the ELF symbol reader the dump runs on every loaded
// object, fed malformed files (seeded with a real one).  A truncated or
// hostile file must give no names, or names inside the file, never a crash.
#include <snmalloc/profile/symbols/symbolize.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <unistd.h>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
  static const std::string path =
    "/tmp/snmalloc-elf-fuzz." + std::to_string(::getpid()) + ".so";
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr)
    return 0;
  std::fwrite(data, 1, size, f);
  std::fclose(f);
  snmalloc::profile::ProcessMapping mapping{0, 0, 0, 0, path, ""};
  snmalloc::profile::detail::ElfSymbolTable table(mapping);
  for (uint64_t address : {uint64_t(0), uint64_t(0x1000), uint64_t(0x401000), ~uint64_t(0)})
  {
    if (const auto* symbol = table.find(address))
    {
      if (std::strlen(symbol->name) > size)
        __builtin_trap();
    }
  }
  return 0;
}
