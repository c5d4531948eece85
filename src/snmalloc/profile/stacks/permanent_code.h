#pragma once
// Layer profile/stacks, stage "record": the code of objects the loader does
// not unload while the profiler runs: the main program, the object holding
// the profiler, and the libraries either names as needed (libc, libstdc++,
// libm, ...: the loader keeps them while those that need them stay).
//
// A frame rule cached for an address there stays true for the life of the
// process, so a walk whose frames all lie there need not ask the loader
// whether a library was unloaded since the rules were made
// (`dl_iterate_phdr` under the loader's lock: 150 instructions of the 1,750
// a sample costs at rate=1 on perf-random-replace).  Other objects' rules
// are trusted only after the walk has read the loader's count
// (frame_rule_cache.h).

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <link.h>

namespace snmalloc::profile
{
  class PermanentCode
  {
    struct Range
    {
      uintptr_t start;
      uintptr_t end;
    };

    static constexpr size_t MAX_RANGES = 16;
    static constexpr size_t MAX_NEEDED = 32;

    struct Search
    {
      uintptr_t anchor; // an address in the profiler's own object
      const char* needed[MAX_NEEDED];
      size_t needed_count = 0;
      Range found[MAX_RANGES];
      size_t count = 0;
      bool first = true;
    };

    Range ranges_[MAX_RANGES] = {};
    // How many of ranges_ are set; written once, after them.
    std::atomic<size_t> count_{0};
    std::atomic<bool> learned_{false};

    static bool holds(const dl_phdr_info* info, uintptr_t address)
    {
      for (size_t i = 0; i < info->dlpi_phnum; i++)
      {
        const ElfW(Phdr)& segment = info->dlpi_phdr[i];
        uintptr_t start = info->dlpi_addr + segment.p_vaddr;
        if (segment.p_type == PT_LOAD && address >= start && address - start < segment.p_memsz)
          return true;
      }
      return false;
    }

    // The span of the object's executable segments.
    static void keep_code(const dl_phdr_info* info, Search& search)
    {
      Range code{UINTPTR_MAX, 0};
      for (size_t i = 0; i < info->dlpi_phnum; i++)
      {
        const ElfW(Phdr)& segment = info->dlpi_phdr[i];
        if (segment.p_type != PT_LOAD || (segment.p_flags & PF_X) == 0)
          continue;
        uintptr_t start = info->dlpi_addr + segment.p_vaddr;
        uintptr_t end = start + segment.p_memsz;
        code.start = start < code.start ? start : code.start;
        code.end = end > code.end ? end : code.end;
      }
      if (code.start < code.end && search.count < MAX_RANGES)
        search.found[search.count++] = code;
    }

    // The names in the object's DT_NEEDED entries.  glibc relocates the
    // dynamic section's string table address in place, other loaders
    // leave it an offset: an address below the object's base is one.
    static void add_needed(const dl_phdr_info* info, Search& search)
    {
      for (size_t i = 0; i < info->dlpi_phnum; i++)
      {
        const ElfW(Phdr)& segment = info->dlpi_phdr[i];
        if (segment.p_type != PT_DYNAMIC)
          continue;
        const auto* dynamic =
          reinterpret_cast<const ElfW(Dyn)*>(info->dlpi_addr + segment.p_vaddr);
        uintptr_t strings = 0;
        for (const ElfW(Dyn)* d = dynamic; d->d_tag != DT_NULL; d++)
        {
          if (d->d_tag == DT_STRTAB)
            strings = d->d_un.d_ptr;
        }
        if (strings == 0)
          return;
        if (strings < info->dlpi_addr)
          strings += info->dlpi_addr;
        for (const ElfW(Dyn)* d = dynamic; d->d_tag != DT_NULL; d++)
        {
          if (d->d_tag == DT_NEEDED && search.needed_count < MAX_NEEDED)
            search.needed[search.needed_count++] =
              reinterpret_cast<const char*>(strings + d->d_un.d_val);
        }
      }
    }

    // The loader's list, first time through: the main program (the first
    // object) and the profiler's.
    static int visit_roots(dl_phdr_info* info, size_t, void* data)
    {
      auto& search = *static_cast<Search*>(data);
      bool root = search.first || holds(info, search.anchor);
      search.first = false;
      if (root)
      {
        keep_code(info, search);
        add_needed(info, search);
      }
      return 0;
    }

    // The list again: the libraries they need, by file name (the loader
    // found each by that name), each name's first object only: the loader
    // lists objects in load order, and one of that name loaded later from
    // elsewhere (with dlopen) may be unloaded.
    static int visit_needed(dl_phdr_info* info, size_t, void* data)
    {
      auto& search = *static_cast<Search*>(data);
      const char* slash = std::strrchr(info->dlpi_name, '/');
      const char* name = slash == nullptr ? info->dlpi_name : slash + 1;
      for (size_t i = 0; i < search.needed_count; i++)
      {
        if (search.needed[i] != nullptr && std::strcmp(name, search.needed[i]) == 0)
        {
          search.needed[i] = nullptr;
          keep_code(info, search);
        }
      }
      return 0;
    }

  public:
    bool learned() const
    {
      return learned_.load(std::memory_order_acquire);
    }

    // Find the objects; call once, where dl_iterate_phdr may be called
    // (it takes the loader's lock).
    void learn()
    {
      Search search{};
      search.anchor = reinterpret_cast<uintptr_t>(&PermanentCode::visit_roots);
      ::dl_iterate_phdr(visit_roots, &search);
      ::dl_iterate_phdr(visit_needed, &search);
      for (size_t i = 0; i < search.count; i++)
        ranges_[i] = search.found[i];
      count_.store(search.count, std::memory_order_release);
      learned_.store(true, std::memory_order_release);
    }

    // Whether the code at `address` stays loaded (false before learn).
    bool contains(uintptr_t address) const
    {
      size_t n = count_.load(std::memory_order_acquire);
      for (size_t i = 0; i < n; i++)
      {
        if (address >= ranges_[i].start && address < ranges_[i].end)
          return true;
      }
      return false;
    }
  };
} // namespace snmalloc::profile
