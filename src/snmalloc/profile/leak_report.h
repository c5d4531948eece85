#pragma once
// Layer profile: the leak report, a plain-text summary of the sampled live
// heap by allocation site, meant for stderr at exit (leak_report=1, see
// override/auto_dump.h): the sites holding the most estimated bytes with
// their symbolized stacks, at most MAX_SITES of them and the rest summed,
// then the total.  A site is a stack-table entry's stack; the entries of
// one stack with different sizes are one site.

#include "pprof/dump_file.h"
#include "snapshot.h"
#include "symbols/allocator_frames.h"
#include "symbols/symbolize.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <map>
#include <string>

namespace snmalloc::profile
{
  namespace leak_detail
  {
    constexpr size_t MAX_SITES = 20;
    constexpr size_t MAX_FRAMES = 12;

    struct Site
    {
      const uintptr_t* frames;
      uint32_t depth;
      double bytes = 0;
      double objects = 0;
    };

    inline std::string amount(double bytes, double objects)
    {
      char text[96];
      std::snprintf(
        text,
        sizeof(text),
        "%.0f bytes (%.1f MiB) in %.0f objects",
        bytes,
        bytes / double(1 << 20),
        objects);
      return text;
    }

    // Live samples summed per stack, largest first.
    inline std::vector<Site> sites_by_size(const Buckets& b)
    {
      std::map<std::vector<uintptr_t>, Site> by_stack;
      for (const ProfileBucket& row : b.rows)
      {
        if (row.inuse_objects <= 0)
          continue;
        std::vector<uintptr_t> key(row.frames, row.frames + row.depth);
        Site& s = by_stack.try_emplace(std::move(key), Site{row.frames, row.depth}).first->second;
        s.bytes += row.inuse_bytes;
        s.objects += row.inuse_objects;
      }
      std::vector<Site> out;
      for (auto& entry : by_stack)
        out.push_back(entry.second);
      std::sort(out.begin(), out.end(), [](const Site& x, const Site& y) {
        return x.bytes > y.bytes;
      });
      return out;
    }
  } // namespace leak_detail

  // The report of the live samples now, as text.  Call with the
  // ProfilerGuard held (it allocates).
  inline std::string leak_report_text()
  {
    using namespace leak_detail;
    Buckets b = aggregate(snapshot_live_samples());
    std::vector<Site> sites = sites_by_size(b);
    std::vector<ProcessMapping> mappings = read_process_mappings();
    Symbolizer symbolizer(mappings);
    double total_bytes = 0, total_objects = 0;
    for (const Site& s : sites)
    {
      total_bytes += s.bytes;
      total_objects += s.objects;
    }
    std::string out = "snmalloc: leak report: " + std::to_string(sites.size()) +
      " allocation sites still hold an estimated " + amount(total_bytes, total_objects) + "\n";
    double rest_bytes = 0, rest_objects = 0;
    for (size_t i = 0; i < sites.size(); i++)
    {
      const Site& s = sites[i];
      if (i >= MAX_SITES)
      {
        rest_bytes += s.bytes;
        rest_objects += s.objects;
        continue;
      }
      out += "  #" + std::to_string(i + 1) + " " + amount(s.bytes, s.objects) + "\n";
      uint32_t f = 0, shown = 0;
      bool on_top = true;
      for (; f < s.depth && shown < MAX_FRAMES; f++)
      {
        // Return address - 1: inside the call, so in the caller's function.
        uintptr_t address = s.frames[f] == 0 ? 0 : s.frames[f] - 1;
        const FunctionName& name = symbolizer.function_name(address);
        // The allocator's frames on top of a stack (a realloc is sampled
        // inside snmalloc::reallocate) are left out, as pprof leaves them
        // out by the profile's drop_frames.
        on_top = on_top && f + 1 < s.depth && is_allocator_function(name.name);
        if (on_top)
          continue;
        char hex[24];
        std::snprintf(hex, sizeof(hex), "0x%" PRIxPTR, address);
        out += std::string("      ") + hex + " " + (name.name.empty() ? "?" : name.name) + "\n";
        shown++;
      }
      if (f < s.depth)
        out += "      ...\n";
    }
    if (sites.size() > MAX_SITES)
      out += "  and " + std::to_string(sites.size() - MAX_SITES) + " more sites: " +
        amount(rest_bytes, rest_objects) + "\n";
    out += "snmalloc: leak report: total " + amount(total_bytes, total_objects) + "\n";
    return out;
  }

  // Write the report to `fd`; 0 or an errno.
  inline int write_leak_report(int fd)
  {
    if (fd < 0)
      return EBADF;
    ProfilerGuard guard;
    try
    {
      std::string text = leak_report_text();
      return detail::write_all(fd, reinterpret_cast<const uint8_t*>(text.data()), text.size());
    }
    catch (const std::bad_alloc&)
    {
      return ENOMEM;
    }
  }
} // namespace snmalloc::profile
