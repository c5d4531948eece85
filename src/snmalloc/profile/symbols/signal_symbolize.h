#pragma once
// Layer profile/symbols: function names for code addresses without allocating or
// taking locks, for the guarded-sampling report written from a SIGSEGV
// handler (guard_report.h).  symbolize.h does the same for dumps with
// std::vector and a demangler that mallocs; here only system calls are
// used: /proc/self/maps read in pieces into a fixed buffer, the object's
// file mapped read-only and its symbol table (.symtab, else .dynsym)
// scanned linearly (a report has a few dozen frames).  One file stays
// mapped between lookups (the process is about to die).
//
// Names are demangled just enough to read: nested and plain C++ names
// without parameters ("_ZN3foo3barEv" -> "foo::bar"); anything fancier is
// printed mangled.

#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace snmalloc::profile
{
  class SignalSafeSymbolizer
  {
  public:
    static constexpr size_t PATH_BYTES = 512;

    struct Found
    {
      const char* symbol = nullptr; // mangled, in the mapped file
      uintptr_t offset = 0; // from the symbol's start
      const char* path = nullptr; // of the object, "" if unknown
    };

  private:
    char path_[PATH_BYTES] = "";
    const uint8_t* image_ = nullptr;
    size_t image_size_ = 0;
    uintptr_t bias_ = 0;

    struct Mapping
    {
      uintptr_t file_start; // where the file's first (offset 0) mapping begins
      char path[PATH_BYTES];
    };

    static uintptr_t hex(const char*& p, const char* end)
    {
      uintptr_t v = 0;
      for (; p < end; p++)
      {
        char c = *p;
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0)
          break;
        v = v * 16 + uintptr_t(d);
      }
      return v;
    }

    // One line of /proc/self/maps: "start-end perms offset dev inode path".
    // True, with `m` filled, if it maps `address`.
    static bool line_maps(
      const char* p, const char* end, uintptr_t address, uintptr_t& file_start, Mapping& m)
    {
      uintptr_t start = hex(p, end);
      p++;
      uintptr_t limit = hex(p, end);
      const char* path = p;
      for (int field = 0; field < 4 && path < end; field++)
      {
        while (path < end && *path == ' ')
          path++;
        if (field == 1)
        {
          const char* q = path;
          if (hex(q, end) == 0)
            file_start = start; // offset 0: the file's first mapping
        }
        while (path < end && *path != ' ')
          path++;
      }
      while (path < end && *path == ' ')
        path++;
      if (address < start || address >= limit)
        return false;
      size_t n = size_t(end - path) < PATH_BYTES - 1 ? size_t(end - path) : PATH_BYTES - 1;
      __builtin_memcpy(m.path, path, n);
      m.path[n] = '\0';
      m.file_start = file_start;
      return true;
    }

    static bool find_mapping(uintptr_t address, Mapping& m)
    {
      int fd = ::open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
      if (fd < 0)
        return false;
      // Static, as the Mapping in find: a signal stack may be as small as
      // 8 KiB (Rust's threads), and the handler reports once.
      static char buffer[4096];
      size_t have = 0;
      uintptr_t file_start = 0;
      bool found = false;
      for (;;)
      {
        ssize_t got = ::read(fd, buffer + have, sizeof(buffer) - have);
        if (got <= 0)
          break;
        have += size_t(got);
        size_t line = 0;
        for (size_t i = 0; i < have; i++)
        {
          if (buffer[i] != '\n')
            continue;
          if (line_maps(buffer + line, buffer + i, address, file_start, m))
          {
            found = true;
            break;
          }
          line = i + 1;
        }
        if (found)
          break;
        // Keep the partial last line; a line longer than the buffer is lost.
        if (line == 0 && have == sizeof(buffer))
          have = 0;
        else
        {
          __builtin_memmove(buffer, buffer + line, have - line);
          have -= line;
        }
      }
      ::close(fd);
      return found;
    }

    template<typename T>
    const T* at(uint64_t offset, uint64_t count = 1) const
    {
      if (offset > image_size_ || offset % alignof(T) != 0 || count > (image_size_ - offset) / sizeof(T))
        return nullptr;
      return reinterpret_cast<const T*>(image_ + offset);
    }

    bool load(const Mapping& m)
    {
      if (image_ != nullptr && __builtin_strcmp(path_, m.path) == 0)
        return true;
      if (image_ != nullptr)
        ::munmap(const_cast<uint8_t*>(image_), image_size_);
      image_ = nullptr;
      if (m.path[0] != '/')
        return false;
      int fd = ::open(m.path, O_RDONLY | O_CLOEXEC);
      if (fd < 0)
        return false;
      struct stat st;
      void* p = MAP_FAILED;
      if (::fstat(fd, &st) == 0 && st.st_size > 0)
        p = ::mmap(nullptr, size_t(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
      ::close(fd);
      if (p == MAP_FAILED)
        return false;
      image_ = static_cast<const uint8_t*>(p);
      image_size_ = size_t(st.st_size);
      __builtin_memcpy(path_, m.path, sizeof(path_));
      // Run-time address minus ELF address: the first mapping's start less
      // the first loadable segment's page.
      const auto* h = at<ElfW(Ehdr)>(0);
      if (h == nullptr || __builtin_memcmp(h->e_ident, ELFMAG, SELFMAG) != 0)
        return false;
      const auto* ph = at<ElfW(Phdr)>(h->e_phoff, h->e_phnum);
      uintptr_t first_vaddr = 0;
      for (size_t i = 0; ph != nullptr && i < h->e_phnum; i++)
      {
        if (ph[i].p_type == PT_LOAD)
        {
          first_vaddr = ph[i].p_vaddr & ~uintptr_t(ph[i].p_align > 1 ? ph[i].p_align - 1 : 0);
          break;
        }
      }
      bias_ = m.file_start - first_vaddr;
      return true;
    }

    const ElfW(Sym)* find_symbol(uintptr_t vaddr, uint32_t type, const char*& strings) const
    {
      const auto* h = at<ElfW(Ehdr)>(0);
      const auto* sections = h == nullptr ? nullptr : at<ElfW(Shdr)>(h->e_shoff, h->e_shnum);
      for (size_t i = 0; sections != nullptr && i < h->e_shnum; i++)
      {
        const ElfW(Shdr)& table = sections[i];
        if (table.sh_type != type || table.sh_link >= h->e_shnum)
          continue;
        const ElfW(Shdr)& names = sections[table.sh_link];
        size_t count = table.sh_size / sizeof(ElfW(Sym));
        const auto* symbols = at<ElfW(Sym)>(table.sh_offset, count);
        strings = at<char>(names.sh_offset, names.sh_size);
        if (symbols == nullptr || strings == nullptr)
          return nullptr;
        for (size_t s = 0; s < count; s++)
        {
          const ElfW(Sym)& e = symbols[s];
          if (
            ELF64_ST_TYPE(e.st_info) == STT_FUNC && e.st_shndx != SHN_UNDEF &&
            e.st_name < names.sh_size && vaddr - e.st_value < e.st_size)
            return &e;
        }
        return nullptr;
      }
      return nullptr;
    }

  public:
    // The function holding code address `address`.
    Found find(uintptr_t address)
    {
      Found f;
      static Mapping m; // too big for a signal stack; the handler runs once
      if (!find_mapping(address, m))
        return f;
      f.path = m.path;
      if (!load(m))
        return f;
      f.path = path_;
      const char* strings = nullptr;
      const ElfW(Sym)* s = find_symbol(address - bias_, SHT_SYMTAB, strings);
      if (s == nullptr)
        s = find_symbol(address - bias_, SHT_DYNSYM, strings);
      if (s == nullptr)
        return f;
      f.symbol = strings + s->st_name;
      f.offset = address - bias_ - s->st_value;
      return f;
    }

    // `symbol` demangled into `out` as far as this reader knows how (see
    // the top); the symbol itself otherwise.
    static void readable_name(const char* symbol, char* out, size_t capacity)
    {
      size_t o = 0;
      auto put = [&](const char* s, size_t n) {
        for (size_t i = 0; i < n && o + 1 < capacity; i++)
          out[o++] = s[i];
      };
      const char* p = symbol;
      bool ok = p[0] == '_' && p[1] == 'Z';
      if (ok)
      {
        p += 2;
        if (*p == 'L')
          p++;
        bool nested = *p == 'N';
        if (nested)
          p++;
        while (*p == 'K' || *p == 'V')
          p++;
        bool first = true;
        for (;;)
        {
          if (p[0] == 'S' && p[1] == 't')
          {
            put("std", 3);
            p += 2;
            first = false;
            continue;
          }
          if (*p < '0' || *p > '9')
            break;
          size_t n = 0;
          while (*p >= '0' && *p <= '9')
            n = n * 10 + size_t(*p++ - '0');
          if (__builtin_strlen(p) < n)
          {
            ok = false;
            break;
          }
          if (!first)
            put("::", 2);
          if (n == 12 && __builtin_memcmp(p, "_GLOBAL__N_1", 12) == 0)
            put("(anonymous namespace)", 21);
          else
            put(p, n);
          p += n;
          first = false;
          if (!nested)
            break;
        }
        ok = ok && !first && (!nested || *p == 'E');
      }
      if (!ok)
      {
        o = 0;
        put(symbol, __builtin_strlen(symbol));
      }
      out[o] = '\0';
    }
  };
} // namespace snmalloc::profile
