#pragma once
// Layer profile/symbols: what a dump knows about the code behind the addresses it
// records: the executable mappings of the process (file, offsets, GNU build
// ID, so pprof can find and verify the binaries) and function names.
//
// Runs during a dump, outside every allocator lock, with the caller's
// re-entrancy guard set, so the allocations made here are served unsampled.

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <cxxabi.h>
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <memory>
#include <string>
#include <string_view>
#include <sys/mman.h>
#include <sys/stat.h>
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
    uint64_t load_bias; // Run-time address minus ELF virtual address.
    std::string path;
    std::string build_id; // Lowercase hex; empty if the object has none.
  };

  namespace detail
  {
    // Rust's legacy symbols are C++-mangled paths whose components carry
    // escapes ($LT$ for '<', .. for "::", ...) and end in a hash
    // component "h<16 hex digits>".  Turn the C++ demangler's output for
    // them into the Rust path, e.g. "<a::B as c::D>::f".  Other names are
    // returned unchanged.
    inline std::string tidy_rust_legacy(const std::string& name)
    {
      size_t hash = name.rfind("::h");
      if (hash == std::string::npos || name.size() - hash != 19)
        return name;
      for (size_t i = hash + 3; i < name.size(); i++)
      {
        if (!std::isxdigit(static_cast<unsigned char>(name[i])))
          return name;
      }
      static const std::pair<const char*, const char*> escapes[] = {
        {"$LT$", "<"}, {"$GT$", ">"}, {"$RF$", "&"}, {"$BP$", "*"}, {"$C$", ","},
        {"$SP$", "@"}, {"$u20$", " "}, {"$u22$", "\""}, {"$u27$", "'"}, {"$u2b$", "+"},
        {"$u3b$", ";"}, {"$u5b$", "["}, {"$u5d$", "]"}, {"$u7b$", "{"}, {"$u7d$", "}"},
        {"$u7e$", "~"}};
      std::string out;
      std::string_view in(name.data(), hash);
      for (size_t i = 0; i < in.size();)
      {
        if (in[i] == '$')
        {
          bool replaced = false;
          for (const auto& [from, to] : escapes)
          {
            if (in.substr(i).rfind(from, 0) == 0)
            {
              out += to;
              i += std::strlen(from);
              replaced = true;
              break;
            }
          }
          if (!replaced)
            out += in[i++];
        }
        else if (in.substr(i, 2) == "..")
        {
          out += "::";
          i += 2;
        }
        else
        {
          out += in[i++];
        }
      }
      // A leading "_" protects a component starting with '$' or a digit.
      if (out.rfind("_<", 0) == 0)
        out.erase(0, 1);
      return out;
    }

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

    // The NT_GNU_BUILD_ID note among the notes of one PT_NOTE segment
    // (`size` bytes, fields padded to `align`, which is 4, or 8 for
    // segments of 8-aligned notes), as lowercase hex; "" if none.
    inline std::string build_id_in_notes(const uint8_t* notes, size_t size, size_t align)
    {
      align = align == 8 ? 8 : 4;
      auto padded = [align](size_t n) { return (n + align - 1) & ~(align - 1); };
      size_t at = 0;
      while (at + sizeof(ElfW(Nhdr)) <= size)
      {
        ElfW(Nhdr) header;
        memcpy(&header, notes + at, sizeof(header));
        size_t name_at = at + sizeof(header);
        size_t desc_at = name_at + padded(header.n_namesz);
        size_t next = desc_at + padded(header.n_descsz);
        if (next > size)
          break;
        if (
          header.n_type == NT_GNU_BUILD_ID && header.n_namesz == 4 &&
          memcmp(notes + name_at, "GNU", 4) == 0)
          return lowercase_hex(notes + desc_at, header.n_descsz);
        at = next;
      }
      return {};
    }

    // Loaded objects keep their PT_NOTE segments in memory.
    inline std::string loaded_build_id(const dl_phdr_info& object)
    {
      for (ElfW(Half) i = 0; i < object.dlpi_phnum; i++)
      {
        const ElfW(Phdr)& segment = object.dlpi_phdr[i];
        if (segment.p_type != PT_NOTE)
          continue;
        std::string id = build_id_in_notes(
          reinterpret_cast<const uint8_t*>(object.dlpi_addr + segment.p_vaddr),
          segment.p_filesz,
          segment.p_align);
        if (!id.empty())
          return id;
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
          build_id = loaded_build_id(*object);
        uint64_t start = object->dlpi_addr + segment.p_vaddr;
        uint64_t limit = start + segment.p_memsz;
        mappings.push_back(
          {start & ~(page - 1),
           (limit + page - 1) & ~(page - 1),
           segment.p_offset & ~(page - 1),
           object->dlpi_addr,
           path,
           build_id});
      }
      return 0;
    }

    // The function symbols of one object's file (.symtab, or .dynsym when
    // stripped), sorted for lookup by run-time address. The file is mapped
    // read-only for the life of the table; names point into it. A file
    // that cannot be read or parsed, or whose build ID is not the loaded
    // object's (rebuilt since it was loaded), gives an empty table.
    class ElfSymbolTable
    {
    public:
      struct Symbol
      {
        uint64_t start; // Run-time address.
        uint64_t size;
        const char* name;
        // Global and of default visibility: of aliases, the name callers use
        // ("realloc", not the profiler's hidden "snmalloc_entry_realloc").
        bool exported;
      };

    private:
      const uint8_t* image = nullptr;
      size_t image_size = 0;
      std::vector<Symbol> symbols;

      // `count` Ts at `offset`, or nullptr when they are not all inside the
      // file or are misaligned (the image is page-aligned): a hostile file
      // gives no names (found by the ELF fuzz target).
      template<typename T>
      const T* at(uint64_t offset, uint64_t count = 1) const
      {
        if (
          offset > image_size || offset % alignof(T) != 0 ||
          count > (image_size - offset) / sizeof(T))
          return nullptr;
        return reinterpret_cast<const T*>(image + offset);
      }

      bool map_file(const std::string& path)
      {
        int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0)
          return false;
        struct stat status;
        void* mapped = MAP_FAILED;
        if (fstat(fd, &status) == 0 && status.st_size > 0)
          mapped = mmap(
            nullptr, static_cast<size_t>(status.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
        ::close(fd);
        if (mapped == MAP_FAILED)
          return false;
        image = static_cast<const uint8_t*>(mapped);
        image_size = static_cast<size_t>(status.st_size);
        return true;
      }

      std::string file_build_id(const ElfW(Ehdr)& header) const
      {
        const auto* segments = at<ElfW(Phdr)>(header.e_phoff, header.e_phnum);
        for (size_t i = 0; segments != nullptr && i < header.e_phnum; i++)
        {
          const ElfW(Phdr)& segment = segments[i];
          const auto* notes = at<uint8_t>(segment.p_offset, segment.p_filesz);
          if (segment.p_type != PT_NOTE || notes == nullptr)
            continue;
          std::string id = build_id_in_notes(notes, segment.p_filesz, segment.p_align);
          if (!id.empty())
            return id;
        }
        return {};
      }

      // Reads the symbol table of `type` (SHT_SYMTAB or SHT_DYNSYM), with
      // the string table its sh_link names.
      bool read_symbols(const ElfW(Shdr)* sections, size_t count, uint32_t type, uint64_t bias)
      {
        for (size_t i = 0; i < count; i++)
        {
          const ElfW(Shdr)& table = sections[i];
          if (table.sh_type != type || table.sh_link >= count)
            continue;
          const ElfW(Shdr)& names = sections[table.sh_link];
          size_t symbol_count = table.sh_size / sizeof(ElfW(Sym));
          const auto* entries = at<ElfW(Sym)>(table.sh_offset, symbol_count);
          const auto* strings = at<char>(names.sh_offset, names.sh_size);
          if (entries == nullptr || strings == nullptr || names.sh_size == 0)
            return false;
          for (size_t s = 0; s < symbol_count; s++)
          {
            const ElfW(Sym)& entry = entries[s];
            uint8_t kind = ELF64_ST_TYPE(entry.st_info);
            if (
              (kind != STT_FUNC && kind != STT_GNU_IFUNC) || entry.st_shndx == SHN_UNDEF ||
              entry.st_size == 0 || entry.st_name >= names.sh_size ||
              memchr(strings + entry.st_name, '\0', names.sh_size - entry.st_name) == nullptr)
              continue;
            bool exported = ELF64_ST_BIND(entry.st_info) != STB_LOCAL &&
              ELF64_ST_VISIBILITY(entry.st_other) == STV_DEFAULT;
            symbols.push_back(
              {entry.st_value + bias, entry.st_size, strings + entry.st_name, exported});
          }
          return true;
        }
        return false;
      }

    public:
      explicit ElfSymbolTable(const ProcessMapping& mapping)
      {
        if (!map_file(mapping.path))
          return;
        const auto* header = at<ElfW(Ehdr)>(0);
        if (
          header == nullptr || memcmp(header->e_ident, ELFMAG, SELFMAG) != 0 ||
          header->e_ident[EI_CLASS] != ELFCLASS64 ||
          header->e_shentsize != sizeof(ElfW(Shdr)))
          return;
        if (!mapping.build_id.empty() && file_build_id(*header) != mapping.build_id)
          return;
        const auto* sections = at<ElfW(Shdr)>(header->e_shoff, header->e_shnum);
        if (header->e_shoff == 0 || sections == nullptr)
          return;
        if (!read_symbols(sections, header->e_shnum, SHT_SYMTAB, mapping.load_bias))
          read_symbols(sections, header->e_shnum, SHT_DYNSYM, mapping.load_bias);
        // By address; of aliases at one address, the exported ones first,
        // then the first in the table.
        std::stable_sort(symbols.begin(), symbols.end(), [](const Symbol& a, const Symbol& b) {
          return a.start != b.start ? a.start < b.start : a.exported && !b.exported;
        });
      }

      bool empty() const
      {
        return symbols.empty();
      }

      ElfSymbolTable(const ElfSymbolTable&) = delete;
      ElfSymbolTable& operator=(const ElfSymbolTable&) = delete;

      ~ElfSymbolTable()
      {
        if (image != nullptr)
          munmap(const_cast<uint8_t*>(image), image_size);
      }

      // The symbol whose range holds `address`, or nullptr.
      const Symbol* find(uint64_t address) const
      {
        auto after = std::upper_bound(
          symbols.begin(), symbols.end(), address, [](uint64_t a, const Symbol& s) {
            return a < s.start;
          });
        if (after == symbols.begin())
          return nullptr;
        // Aliases share a start: step back to the first of them.
        auto found = std::prev(after);
        while (found != symbols.begin() && std::prev(found)->start == found->start)
          --found;
        return address - found->start < found->size ? &*found : nullptr;
      }
    };
  } // namespace detail

  // The executable segments of every loaded object, the main program's
  // first (pprof takes mapping 1 to be the main binary).
  inline std::vector<ProcessMapping> read_process_mappings()
  {
    std::vector<ProcessMapping> mappings;
    dl_iterate_phdr(detail::add_executable_segments, &mappings);
    return mappings;
  }

  // A function's name as the symbol table has it (mangled, for C++) and
  // demangled; pprof's Function.system_name and Function.name.
  struct FunctionName
  {
    std::string name;
    std::string system_name;
  };

  // Names of the functions containing code addresses, from the ELF symbol
  // table of each mapping's file, read once per object; dladdr for objects
  // without a readable file (the vDSO, deleted or rebuilt binaries).
  //
  // Why not dladdr first and libunwind's get_proc_name after it: dladdr
  // sees only the dynamic symbol table (no static functions, nothing of an
  // executable not linked with -rdynamic), and libunwind re-reads
  // /proc/self/maps and maps the file on every call: ~50 us a function,
  // measured 540 ms for the 20,000 addresses of the dump benchmark
  // (encode_benchmark_test.cc), against a 250 ms budget for the whole dump.
  //
  // A dump asks once per distinct address; names are cached per function
  // (symbol start) and demangled once.
  class Symbolizer
  {
    const std::vector<ProcessMapping>& mappings;
    std::unordered_map<std::string, std::unique_ptr<detail::ElfSymbolTable>> tables;
    std::unordered_map<uintptr_t, FunctionName> functions;
    const FunctionName unknown{};
    char* demangle_buffer = nullptr;
    size_t demangle_capacity = 0;

    const detail::ElfSymbolTable* table_for(uintptr_t address)
    {
      for (const ProcessMapping& mapping : mappings)
      {
        if (address < mapping.start || address >= mapping.limit)
          continue;
        auto [entry, inserted] = tables.try_emplace(mapping.path);
        if (inserted)
          entry->second = std::make_unique<detail::ElfSymbolTable>(mapping);
        return entry->second.get();
      }
      return nullptr;
    }

    FunctionName named(const char* symbol)
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
          return {detail::tidy_rust_legacy(demangled), symbol};
        }
      }
      return {symbol, symbol};
    }

    const FunctionName& cached(uintptr_t start, const char* symbol)
    {
      auto [entry, inserted] = functions.try_emplace(start);
      if (inserted)
        entry->second = named(symbol);
      return entry->second;
    }

  public:
    // `process_mappings` must outlive the Symbolizer.
    explicit Symbolizer(const std::vector<ProcessMapping>& process_mappings)
    : mappings(process_mappings)
    {}

    Symbolizer(const Symbolizer&) = delete;
    Symbolizer& operator=(const Symbolizer&) = delete;

    ~Symbolizer()
    {
      free(demangle_buffer);
    }

    // The function containing `address`; empty names if no symbol table
    // knows it. The reference stays valid for the life of the Symbolizer.
    const FunctionName& function_name(uintptr_t address)
    {
      const detail::ElfSymbolTable* table = table_for(address);
      if (table != nullptr && !table->empty())
      {
        // dladdr would only scan a subset of the same symbols, slowly.
        const auto* symbol = table->find(address);
        return symbol == nullptr ? unknown : cached(symbol->start, symbol->name);
      }
      Dl_info info;
      if (
        dladdr(reinterpret_cast<void*>(address), &info) != 0 &&
        info.dli_sname != nullptr && info.dli_saddr != nullptr)
        return cached(reinterpret_cast<uintptr_t>(info.dli_saddr), info.dli_sname);
      return unknown;
    }
  };
} // namespace snmalloc::profile
