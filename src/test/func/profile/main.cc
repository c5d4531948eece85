// Catch2's main, linked into every heap-profiling test executable, with the
// check that the executable really runs on snmalloc built with profiling.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
#include <cstdlib>
#include <snmalloc/snmalloc.h>
#include <string>

// Exported by the shim; referencing them also pulls the shim's object out
// of the static archive, so malloc and friends are ours.
extern "C" const char* snmalloc_identity(void);
extern "C" int snmalloc_profile_is_active(void);

TEST_CASE("runs on the profiling snmalloc")
{
  REQUIRE(std::string(snmalloc_identity()) == "snmalloc");
  REQUIRE(snmalloc::config::profile);
  void* p = std::malloc(1000);
  REQUIRE(snmalloc::alloc_size(p) >= 1000);
  std::free(p);
  REQUIRE(snmalloc_profile_is_active() == (snmalloc::profile::is_active() ? 1 : 0));
}
