#pragma once
// Layer profile/symbols: which functions are the allocator itself, by
// their demangled names.  A dump gives pprof the pattern (drop_frames), so
// that each stack ends at the caller of malloc or new; the leak report
// tests each name itself, with no regex engine.

#include <string_view>

namespace snmalloc::profile
{
  // Functions that are the allocator itself, for pprof's drop_frames: pprof
  // cuts each stack at the outermost frame whose name (stripped of its
  // parameters) matches, so profiles end at the caller of malloc/new.
  // pprof compiles this as "^(" + regex + ")$" (profile/prune.go,
  // RemoveUninteresting), so each alternative must match a whole name:
  // "snmalloc::.*", not "^snmalloc::".  Template functions are named with
  // their return type first ("void* snmalloc::..."), and compilers add
  // suffixes to the parts of functions they split or specialise
  // ("posix_memalign.cold"); both are allowed for.
  inline constexpr std::string_view allocator_frames_regex =
    "(?:snmalloc::.*|.*[ *&]snmalloc::.*|"
    "malloc|calloc|realloc|reallocarray|free|posix_memalign|"
    "aligned_alloc|memalign|valloc|pvalloc|operator new.*|"
    "__libc_(?:malloc|calloc|realloc|free|memalign|valloc|pvalloc)|"
    // Rust's allocation shims and the global-allocator adaptor
    "__rust_alloc|__rust_alloc_zeroed|__rust_realloc|__rdl_.*|__rg_.*|"
    "alloc::alloc::.*|<.* as core::alloc::global::GlobalAlloc>::.*)"
    "(?:\\.cold|\\.part\\.[0-9]+|\\.isra\\.[0-9]+|\\.constprop\\.[0-9]+)*";

  // A demangled function name without its parameters and what follows
  // them ("f(int) const [clone .cold]" -> "f"), as pprof reads a name for
  // drop_frames: cut at the first "(" that is not "(anonymous namespace)"
  // or the one of "operator()".
  inline std::string_view without_parameters(std::string_view name)
  {
    for (size_t at = name.find('('); at != std::string_view::npos; at = name.find('(', at + 1))
    {
      bool call_operator = at >= 8 && name.substr(at - 8, 10) == "operator()";
      if (!call_operator && name.substr(at, 21) != "(anonymous namespace)")
        return name.substr(0, at);
    }
    return name;
  }

  // allocator_frames_regex's test of a name, without a regex engine:
  // libstdc++'s recurses once a character, and a template's name of a
  // thousand characters overflowed a 256 KiB thread stack at exit (the
  // leak report).  unit-pprof-structure checks that the two agree.
  inline bool is_allocator_function(std::string_view full_name)
  {
    std::string_view name = without_parameters(full_name);
    auto ends_with = [&name](std::string_view end) {
      return name.size() >= end.size() && name.substr(name.size() - end.size()) == end;
    };
    auto starts_with = [&name](std::string_view start) { return name.substr(0, start.size()) == start; };
    // The suffixes of a function's split or specialised parts.
    for (bool cut = true; cut;)
    {
      cut = false;
      if (ends_with(".cold"))
      {
        name.remove_suffix(5);
        cut = true;
        continue;
      }
      size_t digits = 0;
      while (digits < name.size() && name[name.size() - 1 - digits] >= '0' &&
             name[name.size() - 1 - digits] <= '9')
        digits++;
      if (digits == 0)
        break;
      std::string_view before = name.substr(0, name.size() - digits);
      for (std::string_view part : {".part.", ".isra.", ".constprop."})
      {
        if (before.size() >= part.size() && before.substr(before.size() - part.size()) == part)
        {
          name = before.substr(0, before.size() - part.size());
          cut = true;
          break;
        }
      }
    }
    for (std::string_view exact :
         {"malloc", "calloc", "realloc", "reallocarray", "free", "posix_memalign", "aligned_alloc",
          "memalign", "valloc", "pvalloc", "__libc_malloc", "__libc_calloc", "__libc_realloc",
          "__libc_free", "__libc_memalign", "__libc_valloc", "__libc_pvalloc", "__rust_alloc",
          "__rust_alloc_zeroed", "__rust_realloc"})
    {
      if (name == exact)
        return true;
    }
    for (std::string_view start : {"snmalloc::", "operator new", "__rdl_", "__rg_", "alloc::alloc::"})
    {
      if (starts_with(start))
        return true;
    }
    for (size_t at = name.find("snmalloc::"); at != std::string_view::npos;
         at = name.find("snmalloc::", at + 1))
    {
      if (at > 0 && (name[at - 1] == ' ' || name[at - 1] == '*' || name[at - 1] == '&'))
        return true;
    }
    return starts_with("<") &&
      name.find(" as core::alloc::global::GlobalAlloc>::") != std::string_view::npos;
  }
} // namespace snmalloc::profile
