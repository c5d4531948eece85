// The probe of walker_oracle.py's generated programs, a shared library they
// call at the innermost frame of each call shape: walks the stack with the
// built-in walker (libgcc's where it falls back, and where there is no
// built-in walker) and with libunwind, the oracle, and requires the same
// return addresses, from the probe's caller out to the end of the stack,
// which must reach `main` (the programs export it: -rdynamic).
#include <snmalloc/profile/stacks/stack_capture.h>

#include <cstdio>
#include <dlfcn.h>

namespace
{
  constexpr size_t MAX = 200;
  unsigned long long stacks = 0, frames = 0, fell_back = 0, mismatches = 0;

  void print_frame(const char* who, size_t i, uintptr_t address)
  {
    Dl_info info;
    const char* name = "?";
    const char* object = "?";
    if (::dladdr(reinterpret_cast<void*>(address - 1), &info) != 0)
    {
      name = info.dli_sname != nullptr ? info.dli_sname : "?";
      object = info.dli_fname != nullptr ? info.dli_fname : "?";
    }
    std::fprintf(stderr, "    %s #%zu %#lx %s (%s)\n", who, i, (unsigned long)address, name, object);
  }

  bool reaches(const uintptr_t* a, size_t n, void* function)
  {
    for (size_t i = 0; i < n; i++)
    {
      Dl_info info;
      if (::dladdr(reinterpret_cast<void*>(a[i] - 1), &info) != 0 && info.dli_saddr == function)
        return true;
    }
    return false;
  }
} // namespace

// Returns 0 if the walks agree and reach main, 1 otherwise (both stacks on
// stderr, headed by `shape`).
extern "C" __attribute__((noinline, visibility("default"))) int
walker_oracle_probe(const char* shape)
{
  static void* const main_function = ::dlsym(RTLD_DEFAULT, "main");
  using namespace snmalloc::profile;
  uintptr_t ours[MAX], oracle[MAX];
  // Each walk's first address is its return into this function: two
  // different call sites, compared from the next one, our caller's.
  frame_rule_cache.check_unloads();
  size_t n = walk_stack(ours, MAX);
  bool fell = n == SIZE_MAX;
  if (fell)
    n = walk_stack_libgcc(ours, MAX);
  size_t m = walk_stack_libunwind(oracle, MAX);
  stacks++;
  fell_back += fell ? 1 : 0;
  bool same = n == m && n > 1 && reaches(oracle, m, main_function);
  for (size_t i = 1; same && i < n; i++)
    same = ours[i] == oracle[i];
  if (same)
  {
    frames += n - 1;
    return 0;
  }
  mismatches++;
  std::fprintf(
    stderr,
    "walker_oracle: %s: %s walked %zu frames, libunwind %zu%s\n",
    shape,
    fell ? "libgcc (fallen back to)" : "the built-in walker",
    n,
    m,
    reaches(oracle, m, main_function) ? "" : " (libunwind's walk does not reach main)");
  for (size_t i = 1; i < n; i++)
    print_frame("ours  ", i, ours[i]);
  for (size_t i = 1; i < m; i++)
    print_frame("oracle", i, oracle[i]);
  return 1;
}

// "stacks S frames F fell_back B mismatches M" on stdout.
extern "C" __attribute__((visibility("default"))) void walker_oracle_summary()
{
  std::printf(
    "stacks %llu frames %llu fell_back %llu mismatches %llu\n", stacks, frames, fell_back, mismatches);
}
