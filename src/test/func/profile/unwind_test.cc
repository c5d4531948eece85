// The stack walk of profile/stacks/stack_capture.h on frames of every shape the
// compiler makes (a plain call, a frame of several KiB, alloca, a stack
// realigned for an over-aligned local, a callback from libc built without
// frame pointers, a signal handler, deep recursion): the walk with cached
// rules gives exactly the addresses of the toolchain's unwinder, and both
// contain each level's own return address (__builtin_return_address(0),
// which needs no unwinding) in order.  The walk from a hook's frame
// (walk_stack_from, how a small sample's walk starts) gives the same
// callers.  Built with and without frame pointers (func-profile-unwind,
// func-profile-unwind-nofp).
#include <snmalloc/snmalloc.h>

#include <alloca.h>
#include <catch2/catch.hpp>
#include <csignal>
#include <cstdlib>
#include <string>
#include <vector>

using snmalloc::profile::walk_stack;
using snmalloc::profile::walk_stack_from;
using snmalloc::profile::walk_stack_fully;
using snmalloc::profile::WalkStart;

namespace
{
  constexpr size_t MAX = 128;
  volatile int sink = 0;

  struct Check
  {
    std::string shape;
    std::vector<uintptr_t> walked, walked_from, full, expected;
    bool fell_back = false;
    bool from_fell_back = false;
  };

  // The start a hook makes of its own frame (its frame address keeps it a
  // frame pointer), as Profiler::entered_sample_path does.
  WalkStart start_at(void* frame_address)
  {
    auto* frame = static_cast<uintptr_t*>(frame_address);
    return {reinterpret_cast<uintptr_t>(frame), frame[1]};
  }

  std::vector<Check>* checks = nullptr;
  std::vector<uintptr_t> levels; // return addresses of the levels, innermost first

  // Both walks from the same frame; entry 0 is in this function and 1 is
  // its return address, both the same for the two calls' sites only from 2.
  __attribute__((noinline)) void capture_here(const char* shape)
  {
    uintptr_t a[MAX], b[MAX], f[MAX];
    size_t na = walk_stack(a, MAX);
    size_t nb = walk_stack_fully(b, MAX);
    const uintptr_t* from = f;
    size_t nf = walk_stack_from(start_at(__builtin_frame_address(0)), f, MAX, from);
    Check c;
    c.shape = shape;
    c.fell_back = na == SIZE_MAX;
    if (!c.fell_back)
      c.walked.assign(a, a + na);
    c.from_fell_back = nf == SIZE_MAX;
    if (!c.from_fell_back)
      c.walked_from.assign(from, from + nf);
    c.full.assign(b, b + nb);
    c.expected = levels;
    c.expected.insert(c.expected.begin(), uintptr_t(__builtin_return_address(0)));
    checks->push_back(std::move(c));
  }

  // Each level records its own return address before going deeper.
  struct Level
  {
    Level(uintptr_t return_address)
    {
      levels.insert(levels.begin(), return_address);
    }
    ~Level()
    {
      levels.erase(levels.begin());
    }
  };

  __attribute__((noinline)) void shape_plain()
  {
    Level l(uintptr_t(__builtin_return_address(0)));
    capture_here("plain");
    sink = sink + 1;
  }

  __attribute__((noinline)) void shape_large_frame()
  {
    Level l(uintptr_t(__builtin_return_address(0)));
    char buffer[6000];
    for (size_t i = 0; i < sizeof(buffer); i += 64)
      buffer[i] = char(i);
    sink = buffer[size_t(sink) & 63];
    capture_here("large frame");
    sink = buffer[7];
  }

  __attribute__((noinline)) void shape_alloca(size_t n)
  {
    Level l(uintptr_t(__builtin_return_address(0)));
    char* p = static_cast<char*>(alloca(n));
    for (size_t i = 0; i < n; i++)
      p[i] = char(i);
    sink = p[n / 2];
    capture_here("alloca");
    sink = p[0];
  }

  __attribute__((noinline)) void shape_realigned()
  {
    Level l(uintptr_t(__builtin_return_address(0)));
    alignas(128) char buffer[128];
    for (size_t i = 0; i < sizeof(buffer); i++)
      buffer[i] = char(i);
    sink = buffer[size_t(sink) & 3];
    capture_here("realigned");
    sink = buffer[1];
  }

  int compare_and_capture(const void* x, const void* y)
  {
    static int captured = 0;
    if (captured++ < 2)
    {
      // No Level here: qsort's own frames lie between this and the caller.
      capture_here("qsort callback");
    }
    return *static_cast<const int*>(x) - *static_cast<const int*>(y);
  }

  __attribute__((noinline)) void shape_libc_callback()
  {
    int values[64];
    for (int i = 0; i < 64; i++)
      values[i] = (i * 37) % 64;
    std::qsort(values, 64, sizeof(int), compare_and_capture);
    sink = values[3];
  }

  void on_signal(int)
  {
    capture_here("signal handler");
  }

  __attribute__((noinline)) void all_shapes()
  {
    shape_plain();
    shape_large_frame();
    shape_alloca(100 + size_t(sink & 1));
    shape_realigned();
    shape_libc_callback();
    std::raise(SIGUSR1);
  }

  __attribute__((noinline)) int recurse(int depth)
  {
    Level l(uintptr_t(__builtin_return_address(0)));
    if (depth == 0)
      all_shapes();
    else
      sink = sink + recurse(depth - 1);
    return 1;
  }

  // `inner` appears in `outer` in order, not necessarily adjacent (frames
  // without a Level lie between).
  bool in_order(const std::vector<uintptr_t>& inner, const std::vector<uintptr_t>& outer)
  {
    size_t j = 0;
    for (uintptr_t address : inner)
    {
      while (j < outer.size() && outer[j] != address)
        j++;
      if (j == outer.size())
        return false;
      j++;
    }
    return true;
  }

  // Every shape at several depths, twice: the second time reads every rule
  // from the cache.
  std::vector<Check> walk_every_shape()
  {
    std::vector<Check> taken;
    taken.reserve(256);
    checks = &taken;
    std::signal(SIGUSR1, on_signal);
    for (int pass = 0; pass < 2; pass++)
      for (int depth = 0; depth < 12; depth += 3)
        recurse(depth);
    std::signal(SIGUSR1, SIG_DFL);
    checks = nullptr;
    return taken;
  }
} // namespace

TEST_CASE("the cached stack walk gives the toolchain unwinder's stacks on every frame shape")
{
  std::vector<Check> taken = walk_every_shape();
  size_t fell_back = 0;
  for (const Check& c : taken)
  {
    INFO("shape " << c.shape << ", " << c.full.size() << " frames");
    REQUIRE(c.full.size() > 2);
    if (c.fell_back)
    {
      fell_back++;
      // Only a signal frame needs the toolchain's unwinder.
      CHECK(c.shape == "signal handler");
    }
    else
    {
      REQUIRE(c.walked.size() == c.full.size());
      // Entry 1 is capture_here's return address: the same site for both.
      for (size_t i = 1; i < c.full.size(); i++)
      {
        INFO("frame " << i);
        CHECK(c.walked[i] == c.full[i]);
      }
    }
    // From capture_here's frame: its caller's return address on.
    CHECK(c.from_fell_back == c.fell_back);
    if (!c.from_fell_back)
    {
      std::vector<uintptr_t> callers(c.full.begin() + 2, c.full.end());
      CHECK(c.walked_from == callers);
    }
    // Every level's own return address, in order, after the entry in
    // capture_here.
    std::vector<uintptr_t> outer(c.full.begin() + 1, c.full.end());
    CHECK(in_order(c.expected, outer));
  }
  CHECK(fell_back == 8); // the signal handler of each pass and depth
}

TEST_CASE("the library walker gives every level's own return address on every frame shape")
{
  // The walker of every stack where there is no built-in walker, and of the
  // frames the built-in one does not follow: the profile's readers and the
  // cut at the allocator's frames take its addresses as return addresses
  // (libunwind's on aarch64 gave each minus 1).
  std::vector<Check> taken = walk_every_shape();
  // Five shapes at each of the 8 depths and passes (the qsort callback's
  // only in the process's first walk of them).
  REQUIRE(taken.size() >= 8 * 5);
  for (const Check& c : taken)
  {
    INFO("shape " << c.shape << ", " << c.full.size() << " frames");
    REQUIRE(c.full.size() > 2);
    std::vector<uintptr_t> outer(c.full.begin() + 1, c.full.end());
    CHECK(in_order(c.expected, outer));
  }
}

TEST_CASE("a stack deeper than the buffer is cut at the buffer")
{
  struct Deep
  {
    static __attribute__((noinline)) size_t down(int n, uintptr_t* out)
    {
      if (n == 0)
        return walk_stack(out, MAX);
      size_t r = down(n - 1, out);
      sink = sink + 1;
      return r;
    }
  };
  uintptr_t a[MAX];
  CHECK(Deep::down(200, a) == MAX);
}

namespace
{
  __attribute__((noinline)) WalkStart start_of_a_frame_that_returns()
  {
    WalkStart start = start_at(__builtin_frame_address(0));
    sink = sink + 1;
    return start;
  }

  __attribute__((noinline)) size_t walk_from_below(WalkStart start, uintptr_t* out)
  {
    const uintptr_t* frames = out;
    return walk_stack_from(start, out, MAX, frames);
  }

  __attribute__((noinline)) size_t deeper_then_walk_from(WalkStart start, uintptr_t* out, int n)
  {
    if (n == 0)
      return walk_from_below(start, out);
    size_t r = deeper_then_walk_from(start, out, n - 1);
    sink = sink + 1;
    return r;
  }
}

TEST_CASE("a start in a frame that has returned is not walked")
{
  uintptr_t out[MAX];
  WalkStart start = start_of_a_frame_that_returns();
  // The calls made since from here put their own return addresses where
  // its return address was, or their frames above it.
  CHECK(walk_from_below(start, out) == 0);
  CHECK(deeper_then_walk_from(start, out, 8) == 0);
  const uintptr_t* frames = out;
  CHECK(walk_stack_from(WalkStart{}, out, MAX, frames) == 0);
}
