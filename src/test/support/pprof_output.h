// Profiles read back through `go tool pprof`'s text views (-top, -raw,
// -traces), with this test executable's symbols: what a site's four values
// are, what the profile stores, which stacks it shows.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace snmalloc_test
{
  // A function's name as pprof prints it, without the parameter list and
  // the " const" and " [clone .x]" suffixes: "f(int) const" -> "f".
  // (pprof shows names with or without parameters depending on where it
  // found them.)  GCC's split-off parts keep their own names: "f.cold".
  std::string base_name(std::string name);

  // One allocating function's flat values in the four sample types, as
  // `go tool pprof -top` shows them: the samples whose innermost frame,
  // once the profile's drop_frames has cut the allocator's own frames, is
  // that function.
  struct SiteValues
  {
    int64_t alloc_objects = 0;
    int64_t alloc_space = 0;
    int64_t inuse_objects = 0;
    int64_t inuse_space = 0;
  };

  class SiteTable
  {
    std::map<std::string, SiteValues> by_function_;

  public:
    // Reads `profile` (written by this executable) with pprof -top, once
    // per sample type, with further pprof `options` if given.
    explicit SiteTable(const std::string& profile, const std::string& options = "");

    // All zeros for a function pprof does not list.
    SiteValues operator[](const std::string& function) const;

    bool contains(const std::string& function) const
    {
      return by_function_.count(function) != 0;
    }
  };

  // One sample type's flat values per function (base names) from pprof
  // -top, printed in `unit` ("" for counts, "B", "ns"), with further pprof
  // `options` ("-tagfocus=...", "-mean").  Functions pprof does not list
  // are absent.
  std::map<std::string, int64_t> flat_values(
    const std::string& profile,
    const std::string& sample_index,
    const std::string& unit,
    const std::string& options = "");

  // pprof -raw: the profile as stored, before pprof prunes any frame.
  // Function names are base names.
  struct RawSample
  {
    std::vector<int64_t> values; // in the order of RawProfile::sample_types
    std::vector<std::string> functions; // innermost first
    std::vector<int64_t> bytes_labels;
    // String labels, key to value as printed ("tenant" -> "acme"; the
    // values of a key of several, space-separated).  A label line is told
    // from a sample line by not starting with a digit.
    std::map<std::string, std::string> string_labels;
  };

  struct RawProfile
  {
    std::string period_type;
    int64_t period = -1;
    std::string sample_types; // the header line, e.g. "alloc_objects/count ..."
    std::vector<RawSample> samples;
  };

  RawProfile read_raw(const std::string& profile);

  // pprof -traces: per sample, the value of `sample_index` as printed and the
  // stack after drop_frames, innermost first, as base names.
  struct Trace
  {
    std::string value;
    std::vector<std::string> functions;
  };

  std::vector<Trace> read_traces(const std::string& profile, const std::string& sample_index);
} // namespace snmalloc_test
