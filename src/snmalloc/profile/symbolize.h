#pragma once
// Layer profile: what a dump knows about the code behind the addresses it
// records: the executable mappings of the process (file, offsets, GNU build
// ID, so pprof can find and verify the binaries) and function names.
//
// Runs during a dump, outside every allocator lock, with the caller's
// re-entrancy guard set, so the allocations made here are served unsampled.

#ifndef UNW_LOCAL_ONLY
#  define UNW_LOCAL_ONLY
#endif
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <cxxabi.h>
#include <dlfcn.h>
#include <elf.h>
#include <libunwind.h>
#include <link.h>
#include <string>
#include <unistd.h>
#include <unordered_map>
#include <vector>

namespace snmalloc::profile
{
  // One executable segment of a loaded object, described as a line of
  // /proc/self/maps would describe it (page-aligned start, limit and file
  // offset), which is the form pprof's symbolizer expects.
  struct ProcessMapping
  {
    uint64_t start;
    uint64_t limit;
    uint64_t file_offset;
    std::string path;
    std::string build_id; // Lowercase hex; empty if the object has none.
  };

  namespace detail
  {
    inline std::string lowercase_hex(const uint8_t* bytes, size_t count)
    {
      static constexpr char digits[] = "0123456789abcdef";
      std::string hex(count * 2, '0');
      for (size_t i = 0; i < count; i++)
      {
        hex[2 * i] = digits[bytes[i] >> 4];
        hex[2 * i + 1] = digits[bytes[i] & 0xf];
      }
      return hex;
    }

    // The NT_GNU_BUILD_ID note of a loaded object, read from its PT_NOTE
    // segments in memory (they are part of the first loaded segment).
    inline std::string gnu_build_id(const dl_phdr_info& object)
    {
      for (ElfW(Half) i = 0; i < object.dlpi_phnum; i++)
      {
        const ElfW(Phdr)& segment = object.dlpi_phdr[i];
        if (segment.p_type != PT_NOTE)
          continue;
        const auto* notes =
          reinterpret_cast<const uint8_t*>(object.dlpi_addr + segment.p_vaddr);
        // Note fields are padded to the segment's alignment: 4, or 8 for
        // segments of 8-aligned notes.
        const size_t align = segment.p_align == 8 ? 8 : 4;
        auto padded = [align](size_t n) { return (n + align - 1) & ~(align - 1); };
        size_t at = 0;
        while (at + sizeof(ElfW(Nhdr)) <= segment.p_filesz)
        {
          ElfW(Nhdr) header;
          memcpy(&header, notes + at, sizeof(header));
          size_t name_at = at + sizeof(header);
          size_t desc_at = name_at + padded(header.n_namesz);
          size_t next = desc_at + padded(header.n_descsz);
          if (next > segment.p_filesz)
            break;
          if (
            header.n_type == NT_GNU_BUILD_ID && header.n_namesz == 4 &&
            memcmp(notes + name_at, "GNU", 4) == 0)
            return lowercase_hex(notes + desc_at, header.n_descsz);
          at = next;
        }
      }
      return {};
    }

    inline std::string main_program_path()
    {
      char path[4096];
      ssize_t length = readlink("/proc/self/exe", path, sizeof(path));
      if (length <= 0 || static_cast<size_t>(length) >= sizeof(path))
        return {};
      return std::string(path, static_cast<size_t>(length));
    }

    inline int add_executable_segments(dl_phdr_info* object, size_t, void* context)
    {
      auto& mappings = *static_cast<std::vector<ProcessMapping>*>(context);
      // dl_iterate_phdr visits the main program first, and names it "".
      const bool is_main_program = mappings.empty() && object->dlpi_name[0] == '\0';
      std::string path = is_main_program ? main_program_path() : object->dlpi_name;
      std::string build_id;
      const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
      for (ElfW(Half) i = 0; i < object->dlpi_phnum; i++)
      {
        const ElfW(Phdr)& segment = object->dlpi_phdr[i];
        if (segment.p_type != PT_LOAD || (segment.p_flags & PF_X) == 0)
          continue;
        if (build_id.empty())
          build_id = gnu_build_id(*object);
        uint64_t start = object->dlpi_addr + segment.p_vaddr;
        uint64_t limit = start + segment.p_memsz;
        mappings.push_back(
          {start & ~(page - 1),
           (limit + page - 1) & ~(page - 1),
           segment.p_offset & ~(page - 1),
           path,
           build_id});
      }
      return 0;
    }
  } // namespace detail

  // The executable segments of every loaded object, the main program's
  // first (pprof takes mapping 1 to be the main binary).
  inline std::vector<ProcessMapping> read_process_mappings()
  {
    std::vector<ProcessMapping> mappings;
    dl_iterate_phdr(detail::add_executable_segments, &mappings);
    return mappings;
  }

  // Demangled names of the functions containing code addresses.
  //
  // dladdr answers only for symbols in the dynamic symbol table, which
  // leaves out static functions and everything in an executable not linked
  // with -rdynamic. libunwind's get_proc_name reads the full ELF symbol
  // table instead, but costs ~50 us a call (it parses /proc/self/maps and
  // maps the file each time). libunwind 1.6 has no unw_get_proc_name_by_ip,
  // so the local address space's get_proc_name accessor is called, which is
  // what that function does in later versions.
  //
  // A dump asks once per distinct address; names are cached per function
  // (the start of the unwind-table entry containing the address, a 0.5 us
  // lookup), so the slow lookups run once per function, not per address.
  class Symbolizer
  {
    // Keyed by function start, or by the address itself when the address
    // has no unwind-table entry.
    std::unordered_map<uintptr_t, std::string> names;
    char* demangle_buffer = nullptr;
    size_t demangle_capacity = 0;

    std::string demangle(const char* symbol)
    {
      if (symbol[0] == '_' && symbol[1] == 'Z')
      {
        int status = 0;
        char* demangled =
          abi::__cxa_demangle(symbol, demangle_buffer, &demangle_capacity, &status);
        if (status == 0)
        {
          // __cxa_demangle may have realloc'ed the buffer.
          demangle_buffer = demangled;
          return demangled;
        }
      }
      return symbol;
    }

    std::string lookup(uintptr_t address)
    {
      Dl_info info;
      if (
        dladdr(reinterpret_cast<void*>(address), &info) != 0 &&
        info.dli_sname != nullptr)
        return demangle(info.dli_sname);

      unw_accessors_t* accessors = unw_get_accessors(unw_local_addr_space);
      if (accessors == nullptr || accessors->get_proc_name == nullptr)
        return {};
      // Longer names come back truncated (-UNW_ENOMEM) and still usable.
      char symbol[4096];
      unw_word_t offset = 0;
      int result = accessors->get_proc_name(
        unw_local_addr_space, address, symbol, sizeof(symbol), &offset, nullptr);
      if (result != 0 && result != -UNW_ENOMEM)
        return {};
      return demangle(symbol);
    }

  public:
    Symbolizer() = default;
    Symbolizer(const Symbolizer&) = delete;
    Symbolizer& operator=(const Symbolizer&) = delete;

    ~Symbolizer()
    {
      free(demangle_buffer);
    }

    // The demangled name of the function containing `address`, or an empty
    // string if no symbol table knows it. The reference stays valid for
    // the life of the Symbolizer.
    const std::string& function_name(uintptr_t address)
    {
      uintptr_t key = address;
      unw_proc_info_t procedure;
      if (
        unw_get_proc_info_by_ip(unw_local_addr_space, address, &procedure, nullptr) ==
          0 &&
        procedure.start_ip <= address && address < procedure.end_ip)
        key = procedure.start_ip;
      auto [entry, inserted] = names.try_emplace(key);
      if (inserted)
        entry->second = lookup(address);
      return entry->second;
    }
  };
} // namespace snmalloc::profile
