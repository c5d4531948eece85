// A library unloaded and another mapped at its addresses: the walk's rule
// cache (profile/stacks/frame_rule_cache.h) keeps each return address's frame rule,
// so without forgetting them at an unload a stack through the new library
// would be walked with the old one's frame sizes.  The two modules are
// built from unload_lib.cc with frames of 3072 and 256 bytes at the same
// code addresses; the caller below keeps zeros where the old frame size
// would look for the return address, so a stale rule ends the stack there.
#include "support/files.h"
#include "support/pprof_output.h"
#include "support/profiling.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <dlfcn.h>
#include <link.h>

// Every call of dl_iterate_phdr in this process (the profiler reads the
// loader's count of unloads through it), counted on the way to libc's.
namespace
{
  std::atomic<size_t> loader_reads{0};
}

extern "C" int dl_iterate_phdr(int (*visit)(dl_phdr_info*, size_t, void*), void* data)
{
  using Iterate = int (*)(int (*)(dl_phdr_info*, size_t, void*), void*);
  static Iterate libc_iterate = reinterpret_cast<Iterate>(dlsym(RTLD_NEXT, "dl_iterate_phdr"));
  loader_reads.fetch_add(1);
  return libc_iterate(visit, data);
}

using namespace snmalloc_test;

namespace
{
  using Allocate = void* (*)(size_t);
  constexpr size_t SIZE = 777;

  // Its frame holds 8 KiB of zeros above the library's frame.
  __attribute__((noinline)) void* unload_caller(Allocate allocate)
  {
    volatile char zeros[8192] = {};
    void* object = allocate(SIZE);
    zeros[0] = zeros[sizeof(zeros) - 1];
    return object;
  }

  struct Library
  {
    void* handle;
    Allocate allocate;

    explicit Library(const char* path)
    {
      handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
      INFO(dlerror());
      REQUIRE(handle != nullptr);
      allocate = reinterpret_cast<Allocate>(dlsym(handle, "unload_lib_allocate"));
      REQUIRE(allocate != nullptr);
    }
  };
} // namespace

TEST_CASE("a stack through a library loaded where an unloaded one was is walked with the new library's frames")
{
  TempDir dir;
  void* held = nullptr;
  void* second_handle = nullptr;
  {
    ProfilingAt profiling(1);
    on_fresh_thread([&] {
      Library first(UNLOAD_LIB_LARGE_FRAME);
      // Sampled (R == 1): the walk caches the large frame's rule.
      std::free(unload_caller(first.allocate));
      uintptr_t first_address = reinterpret_cast<uintptr_t>(first.allocate);
      REQUIRE(dlclose(first.handle) == 0);

      Library second(UNLOAD_LIB_SMALL_FRAME);
      second_handle = second.handle;
      // Only then does the cached rule meet the other frame.
      INFO("the loader mapped the second library elsewhere: nothing to test");
      REQUIRE(reinterpret_cast<uintptr_t>(second.allocate) == first_address);
      held = unload_caller(second.allocate);
    });
    dump_or_fail(dir.file("unload.pb.gz"));
  }

  // The live sample is the second library's object; its caller follows it.
  size_t found = 0;
  for (const RawSample& sample : read_raw(dir.file("unload.pb.gz")).samples)
  {
    auto site =
      std::find(sample.functions.begin(), sample.functions.end(), "unload_lib_allocate");
    if (site == sample.functions.end() || sample.values[2] == 0)
      continue;
    found += size_t(sample.values[2]);
    INFO("stack below unload_lib_allocate cut or wrong");
    REQUIRE(site + 1 != sample.functions.end());
    std::string caller = base_name(site[1]);
    CHECK(caller.size() >= 13);
    CHECK(caller.substr(caller.size() - 13) == "unload_caller");
  }
  CHECK(found == 1);
  std::free(held);
  dlclose(second_handle);
}

TEST_CASE("a walk through the program and the libraries it needs does not ask the loader about unloads but one through a dlopened library does at every sample")
{
  if (snmalloc::config::unwinder != snmalloc::config::Unwinder::Builtin)
    return; // the library walkers keep no rules
  constexpr size_t SAMPLES = 200;
  size_t program_reads = 0, library_reads = 0;
  {
    ProfilingAt profiling(1);
    on_fresh_thread([&] {
      Library library(UNLOAD_LIB_SMALL_FRAME);
      // The first samples learn the rules (and which code stays loaded).
      for (size_t i = 0; i < 8; i++)
      {
        std::free(unload_caller(&std::malloc));
        std::free(unload_caller(library.allocate));
      }
      size_t before = loader_reads.load();
      for (size_t i = 0; i < SAMPLES; i++)
        std::free(unload_caller(&std::malloc));
      program_reads = loader_reads.load() - before;
      before = loader_reads.load();
      for (size_t i = 0; i < SAMPLES; i++)
        std::free(unload_caller(library.allocate));
      library_reads = loader_reads.load() - before;
      dlclose(library.handle);
    });
  }
  CHECK(program_reads == 0);
  CHECK(library_reads >= SAMPLES);
}
