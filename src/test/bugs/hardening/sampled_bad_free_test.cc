// Bad frees of sampled objects (profiling builds): the record of a sampled
// object tells a live object from a freed one and from a pointer into one,
// so these are caught at the free itself.  Each child samples every
// allocation (rate 1) on a fresh thread, whose free lists start empty.
#include "support/death.h"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <snmalloc/snmalloc.h>
#include <thread>
#include <utility>

using namespace snmalloc_test;

namespace
{
  // In the child: sample everything, run f on a fresh thread.
  template<typename F>
  void sampled(F f)
  {
    snmalloc::profile::start(1);
    std::thread(f).join();
  }
} // namespace

TEST_CASE("sampled object freed twice", "[bad-free][sampled]")
{
  for (size_t size : {8, 4096, 256 * 1024})
  {
    CAPTURE(size);
    check_dies_naming(
      [size](auto tell) {
        sampled([&] {
          void* p = std::malloc(size);
          tell(p);
          std::free(p);
          std::free(hide(p));
        });
      },
      size > 65536 ? "invalid free of" : "double free of");
  }
}

TEST_CASE("sampled object freed twice after other samples came and went", "[bad-free][sampled]")
{
  check_dies_naming(
    [](auto tell) {
      sampled([&] {
        void* p = std::malloc(100);
        tell(p);
        std::free(p);
        for (int i = 0; i < 10; i++)
          std::free(std::malloc(24));
        std::free(hide(p));
      });
    },
    "double free of");
}

TEST_CASE("sampled object whose header was written over from below", "[bad-free][sampled]")
{
  // One byte, and 24 or 32 bytes of either value: the header's last
  // words are the requested size, the thread, the live bytes the sample
  // stands for and the sampling interval.
  for (auto [by, byte] :
       {std::pair{1, 'x'}, std::pair{24, 'x'}, std::pair{24, '\0'}, std::pair{32, 'x'},
        std::pair{32, '\0'}})
  {
    CAPTURE(by, int(byte));
    check_dies_naming(
      [by = by, byte = byte](auto tell) {
        sampled([&] {
          void* p = std::malloc(100);
          tell(p);
          auto* below = static_cast<volatile char*>(hide(p)) - by;
          for (int i = 0; i < by; i++)
            below[i] = byte;
          std::free(hide(p));
        });
      },
      "overwritten heap header below");
  }
}

TEST_CASE("interior pointer into a sampled object", "[bad-free][sampled]")
{
  for (size_t size : {8, 48, 4096, 256 * 1024})
  {
    for (size_t at : {size_t(8), size / 2})
    {
      if (at == 0 || at >= size)
        continue;
      CAPTURE(size, at);
      check_dies_naming(
        [size, at](auto tell) {
          sampled([&] {
            void* p = std::malloc(size);
            tell(offset(p, at));
            std::free(offset(p, at));
          });
        },
        size > 16384 && at >= 16384 ? "invalid free of" : "interior pointer");
    }
  }
}
