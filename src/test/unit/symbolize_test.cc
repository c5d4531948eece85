// Process mappings and function names, checked against this binary.

#include "support/stack_sites.h"
#include "support/pprof_runner.h"

#include <catch2/catch.hpp>
#include <algorithm>
#include <exception>
#include <set>
#include <snmalloc/profile/symbols/symbolize.h>
#include <zlib.h>

using namespace snmalloc::profile;

namespace
{
  const ProcessMapping* mapping_containing(
    const std::vector<ProcessMapping>& mappings, uintptr_t address)
  {
    for (const ProcessMapping& mapping : mappings)
      if (mapping.start <= address && address < mapping.limit)
        return &mapping;
    return nullptr;
  }

  std::string this_program()
  {
    char path[4096];
    ssize_t length = readlink("/proc/self/exe", path, sizeof(path) - 1);
    REQUIRE(length > 0);
    return std::string(path, static_cast<size_t>(length));
  }

  uintptr_t code_address(void (*function)())
  {
    return reinterpret_cast<uintptr_t>(function);
  }
}

TEST_CASE("the main program's mapping comes first", "[symbolize]")
{
  std::vector<ProcessMapping> mappings = read_process_mappings();
  REQUIRE(!mappings.empty());
  CHECK(mappings[0].path == this_program());
  uintptr_t site = pprof_site_leaf().return_address;
  CHECK(mapping_containing(mappings, site) == &mappings[0]);
}

TEST_CASE("mappings are page-aligned executable ranges of their files", "[symbolize]")
{
  std::vector<ProcessMapping> mappings = read_process_mappings();
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  for (const ProcessMapping& mapping : mappings)
  {
    INFO(mapping.path);
    CHECK(mapping.start < mapping.limit);
    CHECK(mapping.start % page == 0);
    CHECK(mapping.limit % page == 0);
    CHECK(mapping.file_offset % page == 0);
  }

  auto zlib_code = reinterpret_cast<uintptr_t>(&zlibVersion);
  const ProcessMapping* zlib = mapping_containing(mappings, zlib_code);
  REQUIRE(zlib != nullptr);
  CHECK(zlib->path.find("libz.so") != std::string::npos);
  // The file offset maps the address to its bytes in the file: the code of
  // zlibVersion read from the file equals the code in memory.
  FILE* file = fopen(zlib->path.c_str(), "rb");
  REQUIRE(file != nullptr);
  uint8_t from_file[16];
  REQUIRE(fseek(file, static_cast<long>(zlib_code - zlib->start + zlib->file_offset), SEEK_SET) == 0);
  REQUIRE(fread(from_file, 1, sizeof(from_file), file) == sizeof(from_file));
  fclose(file);
  CHECK(memcmp(from_file, reinterpret_cast<const void*>(zlib_code), sizeof(from_file)) == 0);
}

TEST_CASE("the build ID is the one readelf reports, in lowercase hex", "[symbolize]")
{
  std::vector<ProcessMapping> mappings = read_process_mappings();
  REQUIRE(!mappings.empty());
  const std::string& build_id = mappings[0].build_id;
  REQUIRE(!build_id.empty());
  CHECK(build_id.size() % 2 == 0);
  CHECK(build_id.find_first_not_of("0123456789abcdef") == std::string::npos);

  snmalloc_test::CommandResult readelf =
    snmalloc_test::run_command("readelf -n '" + mappings[0].path + "'");
  REQUIRE(readelf.exit_status == 0);
  CHECK_THAT(readelf.output, Catch::Contains("Build ID: " + build_id));
}

TEST_CASE("functions of the executable are named, static ones too", "[symbolize]")
{
  std::vector<ProcessMapping> mappings = read_process_mappings();
  Symbolizer symbolizer(mappings);
  const FunctionName& leaf = symbolizer.function_name(pprof_site_leaf().return_address - 1);
  CHECK(leaf.name == "pprof_site_leaf()");
  CHECK(leaf.system_name == "_Z15pprof_site_leafv");
  CHECK(symbolizer.function_name(pprof_site_root().return_address - 1).name == "pprof_site_root()");
  CHECK(
    symbolizer.function_name(snmalloc_test::call_site_in_pprof_static_site().return_address - 1)
      .name == "(anonymous namespace)::pprof_static_site()");
  CHECK(
    symbolizer.function_name(snmalloc::pprof_test_allocator_frame().return_address - 1).name ==
    "snmalloc::pprof_test_allocator_frame()");
}

TEST_CASE("functions of shared libraries are named and demangled", "[symbolize]")
{
  std::vector<ProcessMapping> mappings = read_process_mappings();
  Symbolizer symbolizer(mappings);
  const FunctionName& zlib = symbolizer.function_name(reinterpret_cast<uintptr_t>(&zlibVersion) + 1);
  CHECK(zlib.name == "zlibVersion");
  CHECK(zlib.system_name == "zlibVersion");
  const FunctionName& terminate = symbolizer.function_name(code_address(&std::terminate) + 1);
  CHECK(terminate.name == "std::terminate()");
  CHECK(terminate.system_name == "_ZSt9terminatev");
}

TEST_CASE("addresses in one function share its name, others differ", "[symbolize]")
{
  std::vector<ProcessMapping> mappings = read_process_mappings();
  Symbolizer symbolizer(mappings);
  uintptr_t leaf = pprof_site_leaf().return_address - 1;
  const FunctionName& function = symbolizer.function_name(leaf);
  // The entry of pprof_site_leaf and its call site are different addresses
  // in the same function.
  uintptr_t entry = reinterpret_cast<uintptr_t>(&pprof_site_leaf);
  REQUIRE(entry != leaf);
  CHECK(&symbolizer.function_name(entry) == &function);
  CHECK(
    symbolizer.function_name(pprof_site_middle().return_address - 1).name != function.name);
}

TEST_CASE("an address outside all code has no name", "[symbolize]")
{
  std::vector<ProcessMapping> mappings = read_process_mappings();
  Symbolizer symbolizer(mappings);
  int on_the_stack = 0;
  CHECK(symbolizer.function_name(reinterpret_cast<uintptr_t>(&on_the_stack)).name.empty());
}

TEST_CASE("without a readable file, dladdr names exported functions", "[symbolize]")
{
  std::vector<ProcessMapping> mappings = read_process_mappings();
  for (ProcessMapping& mapping : mappings)
    mapping.path = "/nonexistent/" + mapping.path;
  Symbolizer symbolizer(mappings);
  CHECK(symbolizer.function_name(reinterpret_cast<uintptr_t>(&zlibVersion) + 1).name == "zlibVersion");
  CHECK(symbolizer.function_name(code_address(&std::terminate) + 1).name == "std::terminate()");
  // Not in any dynamic symbol table.
  CHECK(symbolizer.function_name(pprof_site_leaf().return_address - 1).name.empty());
}

TEST_CASE("a file whose build ID is not the loaded object's is not read", "[symbolize]")
{
  std::vector<ProcessMapping> mappings = read_process_mappings();
  REQUIRE(!mappings[0].build_id.empty());
  for (ProcessMapping& mapping : mappings)
    if (mapping.path == mappings[0].path)
      mapping.build_id = "00";
  Symbolizer symbolizer(mappings);
  CHECK(symbolizer.function_name(pprof_site_leaf().return_address - 1).name.empty());
}

TEST_CASE("functions of the vDSO, which has no file, are named", "[symbolize]")
{
  std::vector<ProcessMapping> mappings = read_process_mappings();
  auto vdso = std::find_if(mappings.begin(), mappings.end(), [](const ProcessMapping& m) {
    return m.path.find("vdso") != std::string::npos;
  });
  REQUIRE(vdso != mappings.end());
  Symbolizer symbolizer(mappings);
  std::set<std::string> names;
  for (uintptr_t address = vdso->start; address < vdso->limit; address += 4)
    names.insert(symbolizer.function_name(address).name);
  CHECK((names.count("__vdso_clock_gettime") + names.count("clock_gettime")) == 1);
}

TEST_CASE("Rust legacy symbols read as Rust paths", "[symbolize]")
{
  using snmalloc::profile::detail::tidy_rust_legacy;
  // What __cxa_demangle makes of Rust's legacy mangling.
  CHECK(
    tidy_rust_legacy("_$LT$snmalloc_prof..SnMalloc$u20$as$u20$core..alloc..global..GlobalAlloc$GT$::alloc::h0123456789abcdef") ==
    "<snmalloc_prof::SnMalloc as core::alloc::global::GlobalAlloc>::alloc");
  CHECK(tidy_rust_legacy("profile_test::hold_vectors::h9f27b041a9f64134") == "profile_test::hold_vectors");
  CHECK(
    tidy_rust_legacy("alloc::raw_vec::RawVec$LT$T$C$A$GT$::reserve::do_reserve_and_handle::h1111111111111111") ==
    "alloc::raw_vec::RawVec<T,A>::reserve::do_reserve_and_handle");
  // C++ names, and names ending in something that is not a Rust hash, stay.
  CHECK(tidy_rust_legacy("std::vector<int>::push_back(int const&)") == "std::vector<int>::push_back(int const&)");
  CHECK(tidy_rust_legacy("ns::hashing") == "ns::hashing");
  CHECK(tidy_rust_legacy("ns::h0123456789abcdeg") == "ns::h0123456789abcdeg");
}
