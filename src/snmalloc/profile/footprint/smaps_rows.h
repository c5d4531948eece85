#pragma once
// Layer profile/footprint: the process's resident memory by mapping kind,
// from /proc/self/smaps, less what the caller has attributed already (the
// allocator's arena, pagemap and profiler regions are anonymous mappings
// too: their resident pages in each mapping are subtracted, so nothing is
// counted twice).  And VmRSS, the figure the rows must add up to.
//
// Kinds: `[binary: name]` a file with code mapped (its data and read-only
// segments too), `[file: name]` other mapped files, `[stack]` the main
// thread's stack, `[thread stacks]` anonymous mappings of at most 16 MiB right
// after an inaccessible guard (glibc's thread stacks), `[anon: 0x..., N MiB]` one
// row each for anonymous mappings with 1 MiB or more resident (a program's
// own mmap of a buffer is worth naming), `[anon: other]` the rest, and the
// kernel's own names (`[heap]`, `[vdso]`, ...).

#include "../../pal/pal.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <map>
#include <set>
#include <string>
#include <unistd.h>
#include <vector>

namespace snmalloc::profile
{
  struct MappingRow
  {
    std::string name;
    size_t resident_bytes;
  };

  namespace smaps_detail
  {
    struct Vma
    {
      uintptr_t start, end;
      bool inaccessible, executable;
      std::string path;
      size_t rss = 0;
    };

    inline std::string read_whole(const char* path)
    {
      std::string text;
      int fd = ::open(path, O_RDONLY | O_CLOEXEC);
      if (fd < 0)
        return text;
      char buffer[16384];
      ssize_t n;
      while ((n = ::read(fd, buffer, sizeof(buffer))) > 0)
        text.append(buffer, size_t(n));
      ::close(fd);
      return text;
    }

    // "start-end perms offset dev inode   path": the fields a row needs.
    inline bool parse_header(const char* line, const char* end, Vma& v)
    {
      char* after;
      v.start = std::strtoull(line, &after, 16);
      if (*after != '-')
        return false;
      v.end = std::strtoull(after + 1, &after, 16);
      if (*after != ' ' || end - after < 5)
        return false;
      v.inaccessible = after[1] == '-' && after[2] == '-' && after[3] == '-';
      v.executable = after[3] == 'x';
      const char* p = after + 1;
      for (int field = 0; field < 4 && p < end; field++)
      {
        while (p < end && *p != ' ')
          p++;
        while (p < end && *p == ' ')
          p++;
      }
      v.path.assign(p, size_t(end - p));
      return true;
    }

    inline std::vector<Vma> read_vmas()
    {
      std::vector<Vma> vmas;
      std::string text = read_whole("/proc/self/smaps");
      const char* p = text.data();
      const char* end = p + text.size();
      while (p < end)
      {
        const char* eol = static_cast<const char*>(std::memchr(p, '\n', size_t(end - p)));
        if (eol == nullptr)
          eol = end;
        if (std::strncmp(p, "Rss:", 4) == 0)
        {
          if (!vmas.empty())
            vmas.back().rss = size_t(std::strtoull(p + 4, nullptr, 10)) * 1024;
        }
        else if ((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f'))
        {
          Vma v;
          if (parse_header(p, eol, v))
            vmas.push_back(std::move(v));
        }
        p = eol + 1;
      }
      return vmas;
    }

    inline std::string base_name(const std::string& path)
    {
      size_t slash = path.rfind('/');
      return slash == std::string::npos ? path : path.substr(slash + 1);
    }

    inline std::string anon_name(const Vma& v)
    {
      char name[96];
      std::snprintf(
        name, sizeof(name), "[anon: 0x%llx, %llu MiB mapped]", static_cast<unsigned long long>(v.start),
        static_cast<unsigned long long>((v.end - v.start) >> 20));
      return name;
    }
  } // namespace smaps_detail

  constexpr size_t OWN_ROW_ANON_BYTES = size_t(1) << 20;
  // glibc's default stack is RLIMIT_STACK, 8 MiB on most systems.
  constexpr size_t THREAD_STACK_MAX_BYTES = size_t(16) << 20;

  // One row per mapping kind with resident bytes left after subtracting,
  // for each mapping, attributed(start, end): the resident bytes in it that
  // the caller has counted already.
  template<typename Attributed>
  std::vector<MappingRow> read_mapping_rows(Attributed&& attributed)
  {
    using smaps_detail::Vma;
    std::vector<Vma> vmas = smaps_detail::read_vmas();
    std::set<std::string> with_code;
    for (const Vma& v : vmas)
      if (v.executable && !v.path.empty() && v.path[0] == '/')
        with_code.insert(v.path);

    std::map<std::string, size_t> rows;
    for (size_t i = 0; i < vmas.size(); i++)
    {
      const Vma& v = vmas[i];
      size_t counted = attributed(v.start, v.end);
      size_t rss = v.rss > counted ? v.rss - counted : 0;
      if (rss == 0)
        continue;
      std::string name;
      if (!v.path.empty() && v.path[0] == '/')
        name = (with_code.count(v.path) != 0 ? "[binary: " : "[file: ") +
          smaps_detail::base_name(v.path) + "]";
      else if (!v.path.empty())
        name = v.path;
      else if (
        i > 0 && vmas[i - 1].inaccessible && vmas[i - 1].end == v.start &&
        v.end - v.start <= THREAD_STACK_MAX_BYTES)
        name = "[thread stacks]";
      else if (rss >= OWN_ROW_ANON_BYTES)
        name = smaps_detail::anon_name(v);
      else
        name = "[anon: other]";
      rows[name] += rss;
    }

    std::vector<MappingRow> out;
    out.reserve(rows.size());
    for (auto& [name, bytes] : rows)
      out.push_back({name, bytes});
    return out;
  }

  // VmRSS of /proc/self/status in bytes; 0 if it cannot be read.
  inline size_t read_vm_rss()
  {
    std::string text = smaps_detail::read_whole("/proc/self/status");
    size_t at = text.find("VmRSS:");
    if (at == std::string::npos)
      return 0;
    return size_t(std::strtoull(text.c_str() + at + 6, nullptr, 10)) * 1024;
  }
} // namespace snmalloc::profile
