// The encoded Profile message, decoded field by field: the invariants that
// pprof would accept silently if broken (duplicate strings, shared
// functions, ids, the order of sample types).

#include "support/stack_sites.h"
#include "support/proto_reader.h"

#include <catch2/catch.hpp>
#include <regex>
#include <map>
#include <set>
#include <snmalloc/profile/pprof/pprof_encoder.h>

using namespace snmalloc::profile;
using namespace snmalloc_test;

namespace
{
  struct DecodedProfile
  {
    Message profile;
    std::vector<std::string> strings;

    explicit DecodedProfile(
      const std::vector<ProfileBucket>& buckets,
      uint64_t dropped = 0,
      SampleMode mode = SampleMode::Bytes)
    {
      std::vector<uint8_t> encoded;
      encode_pprof({4096, 1, 2, dropped, mode}, buckets.data(), buckets.size(), encoded);
      profile = decode(std::string(encoded.begin(), encoded.end()));
      for (const Field& field : all(profile, 6))
        strings.push_back(field.bytes);
    }

    const std::string& string(uint64_t index) const
    {
      REQUIRE(index < strings.size());
      return strings[index];
    }

    std::pair<std::string, std::string> value_type(const std::string& bytes) const
    {
      Message type = decode(bytes);
      return {string(varint_of(type, 1)), string(varint_of(type, 2))};
    }
  };
}

TEST_CASE("the string table starts with the empty string, each string once", "[pprof]")
{
  CallSite leaf = pprof_site_leaf(), root = pprof_site_root();
  std::vector<uintptr_t> stack{leaf.return_address, root.return_address};
  DecodedProfile decoded({{stack.data(), 2, 32, 1, 32, 1, 32}, {stack.data(), 2, 48, 1, 48, 1, 48}});

  REQUIRE(!decoded.strings.empty());
  CHECK(decoded.strings[0].empty());
  std::set<std::string> distinct(decoded.strings.begin(), decoded.strings.end());
  CHECK(distinct.size() == decoded.strings.size());
}

TEST_CASE("header fields: sample types, period, drop_frames", "[pprof]")
{
  DecodedProfile decoded({});
  using Pair = std::pair<std::string, std::string>;
  std::vector<Pair> sample_types;
  for (const Field& field : all(decoded.profile, 1))
    sample_types.push_back(decoded.value_type(field.bytes));
  CHECK(
    sample_types ==
    std::vector<Pair>{
      {"alloc_objects", "count"},
      {"alloc_space", "bytes"},
      {"inuse_objects", "count"},
      {"inuse_space", "bytes"}});
  CHECK(decoded.string(varint_of(decoded.profile, 14)) == "inuse_space");
  CHECK(decoded.value_type(only(decoded.profile, 11).bytes) == Pair{"space", "bytes"});
  CHECK(varint_of(decoded.profile, 12) == 4096);
  CHECK(varint_of(decoded.profile, 9) == 1);
  CHECK(varint_of(decoded.profile, 10) == 2);
  CHECK(decoded.string(varint_of(decoded.profile, 7)) == allocator_frames_regex);
}

TEST_CASE("locations: one per address, return address - 1, one function per name", "[pprof]")
{
  CallSite leaf = pprof_site_leaf(), middle = pprof_site_middle();
  // Two addresses inside pprof_site_leaf: its call site and its entry (as
  // if a call returned to the entry + 1).
  uintptr_t leaf_entry = reinterpret_cast<uintptr_t>(&pprof_site_leaf) + 1;
  std::vector<uintptr_t> first{leaf.return_address, middle.return_address};
  std::vector<uintptr_t> second{leaf_entry, middle.return_address};
  DecodedProfile decoded(
    {{first.data(), 2, 16, 1, 16, 1, 16}, {second.data(), 2, 16, 1, 16, 1, 16}});

  // Samples list location ids innermost first; the shared frame shares its
  // location.
  std::vector<Field> samples = all(decoded.profile, 2);
  REQUIRE(samples.size() == 2);
  std::vector<uint64_t> first_ids = packed(decode(samples[0].bytes), 1);
  std::vector<uint64_t> second_ids = packed(decode(samples[1].bytes), 1);
  REQUIRE(first_ids.size() == 2);
  REQUIRE(second_ids.size() == 2);
  CHECK(first_ids[1] == second_ids[1]);
  CHECK(first_ids[0] != second_ids[0]);
  CHECK(packed(decode(samples[0].bytes), 2) == std::vector<uint64_t>{1, 16, 1, 16});

  std::map<uint64_t, uint64_t> address_of_location, function_of_location;
  for (const Field& field : all(decoded.profile, 4))
  {
    Message location = decode(field.bytes);
    uint64_t id = varint_of(location, 1);
    CHECK(varint_of(location, 2) == 1); // The main program's mapping.
    address_of_location[id] = varint_of(location, 3);
    std::vector<Field> lines = all(location, 4);
    REQUIRE(lines.size() == 1);
    function_of_location[id] = varint_of(decode(lines[0].bytes), 1);
  }
  CHECK(address_of_location.size() == 3);
  CHECK(address_of_location[first_ids[0]] == leaf.return_address - 1);
  CHECK(address_of_location[second_ids[0]] == leaf_entry - 1);
  CHECK(address_of_location[first_ids[1]] == middle.return_address - 1);

  // Both leaf addresses name one Function; middle has its own.
  CHECK(function_of_location[first_ids[0]] == function_of_location[second_ids[0]]);
  CHECK(function_of_location[first_ids[0]] != function_of_location[first_ids[1]]);
  std::map<uint64_t, std::pair<std::string, std::string>> functions;
  for (const Field& field : all(decoded.profile, 5))
  {
    Message function = decode(field.bytes);
    functions[varint_of(function, 1)] = {
      decoded.string(varint_of(function, 2)), decoded.string(varint_of(function, 3))};
  }
  CHECK(functions.size() == 2);
  CHECK(
    functions[function_of_location[first_ids[0]]] ==
    std::pair<std::string, std::string>{"pprof_site_leaf()", "_Z15pprof_site_leafv"});
}

TEST_CASE("mappings: the main program first, ids from 1, has_functions", "[pprof]")
{
  DecodedProfile decoded({});
  std::vector<Field> mappings = all(decoded.profile, 3);
  std::vector<ProcessMapping> process = read_process_mappings();
  REQUIRE(mappings.size() == process.size());
  for (size_t i = 0; i < mappings.size(); i++)
  {
    Message mapping = decode(mappings[i].bytes);
    CHECK(varint_of(mapping, 1) == i + 1);
    CHECK(varint_of(mapping, 2) == process[i].start);
    CHECK(varint_of(mapping, 3) == process[i].limit);
    CHECK(varint_of(mapping, 4) == process[i].file_offset);
    CHECK(decoded.string(varint_of(mapping, 5)) == process[i].path);
    CHECK(decoded.string(varint_of(mapping, 6)) == process[i].build_id);
    CHECK(varint_of(mapping, 7) == 1);
  }
  char self[4096];
  ssize_t length = readlink("/proc/self/exe", self, sizeof(self));
  REQUIRE(length > 0);
  Message first = decode(mappings.at(0).bytes);
  CHECK(decoded.string(varint_of(first, 5)) == std::string(self, static_cast<size_t>(length)));
}

TEST_CASE("drop_frames names the allocator's frames and nothing else", "[pprof]")
{
  // pprof anchors the expression as ^(...)$; std::regex's ECMAScript syntax
  // reads this one as Go's RE2 does.
  const std::regex drop(
    "^(" + std::string(snmalloc::profile::allocator_frames_regex) + ")$");
  // The leak report's test without a regex (is_allocator_function) agrees,
  // on names with their parameters too (which both read without them).
  auto both = [&drop](const std::string& name) {
    bool by_regex =
      std::regex_match(std::string(snmalloc::profile::without_parameters(name)), drop);
    CHECK(snmalloc::profile::is_allocator_function(name) == by_regex);
    return by_regex;
  };
  for (const char* name :
       {"malloc", "free", "posix_memalign.cold", "realloc.part.0", "operator new",
        "operator new[]", "snmalloc::alloc_slow", "void* snmalloc::detail::new_aligned_impl<false>",
        "__rust_alloc", "alloc::alloc::exchange_malloc", "__libc_malloc", "__libc_free.cold",
        "<snmalloc_prof::SnMalloc as core::alloc::global::GlobalAlloc>::alloc",
        "snmalloc::reallocate(void*, unsigned long)", "operator new(unsigned long)",
        "malloc.isra.0.cold", "memalign.constprop.12", "snmalloc::(anonymous namespace)::f(int)",
        "snmalloc::Alloc::operator()(int) const", "void* snmalloc::x(int) [clone .cold]"})
  {
    INFO(name);
    CHECK(both(name));
  }
  for (const char* name :
       {"main", "my_malloc", "malloc_wrapper", "std::vector<snmalloc::X> make",
        "cache::build_cache", "profile_test::hold_vectors", "process(int, snmalloc::Buffer&)",
        "(anonymous namespace)::make(snmalloc::Buffer*)", "malloc.part.", "free.isra.x",
        "__libc_start_main", "Tenant::operator()(snmalloc::X&)", "mallocx", "xmalloc.cold"})
  {
    INFO(name);
    CHECK_FALSE(both(name));
  }
  // A name of any length, as template names can be, in constant stack.
  std::string long_name = "leaky_site<" + std::string(100000, 'T') + ">(int)";
  CHECK_FALSE(snmalloc::profile::is_allocator_function(long_name));
}

TEST_CASE("samples dropped for want of memory are said in a comment", "[pprof]")
{
  // The first comment is always the sampling mode's.
  CHECK(all(DecodedProfile({}).profile, 13).size() == 1);
  DecodedProfile decoded({}, 7);
  auto comments = all(decoded.profile, 13);
  REQUIRE(comments.size() == 2);
  CHECK(decoded.string(comments[1].varint) == "samples dropped (out of memory): 7");
}

TEST_CASE("the sampling mode is the period type and a comment", "[pprof]")
{
  struct Expected
  {
    SampleMode mode;
    const char* type;
    const char* unit;
    const char* comment;
  };
  for (const Expected& e :
       {Expected{SampleMode::Bytes, "space", "bytes",
                 "sampling mode: bytes, Poisson with a mean interval of 4096 bytes"},
        Expected{SampleMode::Count, "objects", "count",
                 "sampling mode: count, each allocation with probability 1/4096"},
        Expected{SampleMode::SizeClass, "objects", "count",
                 "sampling mode: sizeclass, one in every 4096 allocations of each sizeclass"}})
  {
    INFO(mode_name(e.mode));
    DecodedProfile decoded({}, 0, e.mode);
    auto period_type = all(decoded.profile, 11);
    REQUIRE(period_type.size() == 1);
    Message vt = decode(period_type[0].bytes);
    CHECK(decoded.string(all(vt, 1).at(0).varint) == e.type);
    CHECK(decoded.string(all(vt, 2).at(0).varint) == e.unit);
    CHECK(all(decoded.profile, 12).at(0).varint == 4096);
    auto comments = all(decoded.profile, 13);
    REQUIRE(comments.size() == 1);
    CHECK(decoded.string(comments[0].varint) == e.comment);
  }
}
