#include "support/pprof_output.h"

#include "support/files.h"
#include "support/pprof_runner.h"

#include <catch2/catch.hpp>
#include <cctype>
#include <sstream>

namespace snmalloc_test
{
  namespace
  {
    std::vector<std::string> lines_of(const std::string& text)
    {
      std::vector<std::string> lines;
      std::stringstream in(text);
      std::string line;
      while (std::getline(in, line))
        lines.push_back(line);
      return lines;
    }

    std::string trim(const std::string& s)
    {
      size_t first = s.find_first_not_of(" \t");
      if (first == std::string::npos)
        return "";
      size_t last = s.find_last_not_of(" \t");
      return s.substr(first, last - first + 1);
    }

    bool starts_with(const std::string& s, const std::string& prefix)
    {
      return s.compare(0, prefix.size(), prefix) == 0;
    }

    bool ends_with(const std::string& s, const std::string& suffix)
    {
      return s.size() >= suffix.size() &&
        s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
    }

    // An integer as pprof prints it, followed by exactly `unit`.
    int64_t parse_value(const std::string& token, const std::string& unit)
    {
      INFO("pprof value '" << token << "', unit '" << unit << "'");
      REQUIRE(token.size() > unit.size());
      REQUIRE(ends_with(token, unit));
      std::string digits = token.substr(0, token.size() - unit.size());
      REQUIRE(digits.find_first_not_of("-0123456789") == std::string::npos);
      return std::stoll(digits);
    }
  } // namespace

  std::map<std::string, int64_t> flat_values(
    const std::string& profile,
    const std::string& sample_index,
    const std::string& unit,
    const std::string& options)
  {
    // -unit=B prints bytes as exact integers ("28672B") instead of
    // rounded "28kB", -unit=ns nanoseconds ("1500000ns", not "1.50ms");
    // counts are printed as integers already.
    std::string output = pprof_ok(
      "-top -nodecount=100000 -nodefraction=0 -sample_index=" + sample_index +
      (unit.empty() ? " " : " -unit=" + unit + " ") + options + " '" + self_exe() + "' '" +
      profile + "'");
    std::map<std::string, int64_t> values;
    bool in_table = false;
    for (const std::string& line : lines_of(output))
    {
      if (!in_table)
      {
        std::stringstream header(line);
        std::string first, second;
        header >> first >> second;
        in_table = first == "flat" && second == "flat%";
        continue;
      }
      // flat flat% sum% cum cum% name (which may hold spaces)
      std::stringstream row(line);
      std::string flat, flat_share, sum_share, cum, cum_share;
      row >> flat >> flat_share >> sum_share >> cum >> cum_share;
      std::string name;
      std::getline(row, name);
      name = trim(name);
      INFO("pprof -top line: " << line);
      REQUIRE(!name.empty());
      values[base_name(name)] += flat == "0" ? 0 : parse_value(flat, unit);
    }
    INFO("pprof -top output:\n" << output);
    REQUIRE(in_table);
    return values;
  }

  std::string base_name(std::string name)
  {
    for (;;)
    {
      size_t clone = name.rfind(" [clone ");
      if (ends_with(name, " const"))
        name.resize(name.size() - 6);
      else if (ends_with(name, "]") && clone != std::string::npos)
        name.resize(clone);
      else
        break;
    }
    if (ends_with(name, ")"))
    {
      int depth = 0;
      for (size_t i = name.size(); i-- > 0;)
      {
        depth += name[i] == ')' ? 1 : name[i] == '(' ? -1 : 0;
        if (depth == 0)
        {
          name.resize(i);
          break;
        }
      }
    }
    return name;
  }

  SiteTable::SiteTable(const std::string& profile, const std::string& options)
  {
    struct Index
    {
      const char* name;
      const char* unit;
      int64_t SiteValues::*field;
    };
    const Index indices[] = {
      {"alloc_objects", "", &SiteValues::alloc_objects},
      {"alloc_space", "B", &SiteValues::alloc_space},
      {"inuse_objects", "", &SiteValues::inuse_objects},
      {"inuse_space", "B", &SiteValues::inuse_space}};
    for (const Index& index : indices)
      for (const auto& [function, value] : flat_values(profile, index.name, index.unit, options))
        by_function_[function].*index.field += value;
  }

  SiteValues SiteTable::operator[](const std::string& function) const
  {
    auto found = by_function_.find(function);
    return found == by_function_.end() ? SiteValues{} : found->second;
  }

  RawProfile read_raw(const std::string& profile)
  {
    std::string output = pprof_ok("-raw '" + self_exe() + "' '" + profile + "'");
    std::vector<std::string> lines = lines_of(output);
    RawProfile raw;
    // Sample lines name location ids; the Locations section names them.
    std::vector<std::vector<uint64_t>> sample_locations;
    std::map<uint64_t, std::string> function_of_location;
    enum
    {
      HEADER,
      SAMPLES,
      LOCATIONS,
      REST
    } section = HEADER;
    for (size_t i = 0; i < lines.size(); i++)
    {
      const std::string& line = lines[i];
      std::string t = trim(line);
      if (section == HEADER)
      {
        if (starts_with(t, "PeriodType:"))
          raw.period_type = trim(t.substr(11));
        else if (starts_with(t, "Period:"))
          raw.period = std::stoll(trim(t.substr(7)));
        else if (t == "Samples:" && i + 1 < lines.size())
        {
          raw.sample_types = trim(lines[++i]);
          section = SAMPLES;
        }
        continue;
      }
      if (section == SAMPLES)
      {
        if (t == "Locations")
        {
          section = LOCATIONS;
          continue;
        }
        size_t colon = t.find(':');
        INFO("pprof -raw sample line: " << line);
        REQUIRE(colon != std::string::npos);
        if (starts_with(t, "bytes:["))
        {
          // "bytes:[4096]" labels the sample above it.
          REQUIRE(!raw.samples.empty());
          std::string number = t.substr(7, t.find(']') - 7);
          raw.samples.back().bytes_labels.push_back(std::stoll(number));
          continue;
        }
        if (!std::isdigit(static_cast<unsigned char>(t[0])))
        {
          // "team:[red] tenant:[x]": string labels of the sample above.
          REQUIRE(!raw.samples.empty());
          for (size_t at = 0; at < t.size();)
          {
            size_t open = t.find(":[", at), close = t.find(']', open);
            REQUIRE(close != std::string::npos);
            raw.samples.back().string_labels[t.substr(at, open - at)] =
              t.substr(open + 2, close - open - 2);
            at = t.find_first_not_of(' ', close + 1);
          }
          continue;
        }
        RawSample sample;
        std::stringstream values(t.substr(0, colon));
        for (int64_t v; values >> v;)
          sample.values.push_back(v);
        std::vector<uint64_t> ids;
        std::stringstream locations(t.substr(colon + 1));
        for (uint64_t id; locations >> id;)
          ids.push_back(id);
        raw.samples.push_back(sample);
        sample_locations.push_back(ids);
        continue;
      }
      if (section == LOCATIONS)
      {
        if (t == "Mappings")
        {
          section = REST;
          continue;
        }
        // "12: 0x55bdd552950d M=1 name file:line s=0(full name)"; inlined
        // callers follow on lines of their own, which start with no id.
        size_t colon = t.find(':');
        if (colon == std::string::npos || !std::isdigit(static_cast<unsigned char>(t[0])))
          continue;
        uint64_t id = std::stoull(t.substr(0, colon));
        std::stringstream rest(t.substr(colon + 1, t.find(" s=") - colon - 1));
        std::string address, mapping;
        rest >> address >> mapping;
        std::string name;
        std::getline(rest, name);
        name = trim(name);
        name = name.substr(0, name.rfind(' ')); // drop "file:line"
        function_of_location[id] = base_name(name);
      }
    }
    INFO("pprof -raw output:\n" << output);
    REQUIRE(section != HEADER);
    for (size_t i = 0; i < raw.samples.size(); i++)
      for (uint64_t id : sample_locations[i])
        raw.samples[i].functions.push_back(function_of_location[id]);
    return raw;
  }

  std::vector<Trace> read_traces(const std::string& profile, const std::string& sample_index)
  {
    std::string output = pprof_ok(
      "-traces -sample_index=" + sample_index + " '" + self_exe() + "' '" + profile + "'");
    std::vector<Trace> traces;
    bool in_trace = false;
    for (const std::string& line : lines_of(output))
    {
      if (starts_with(line, "-----------+"))
      {
        traces.emplace_back();
        in_trace = true;
        continue;
      }
      if (!in_trace)
        continue;
      std::string t = trim(line);
      if (t.empty())
        continue;
      Trace& trace = traces.back();
      // "     bytes:  4kB" labels the trace; "      28kB   site" holds the
      // value and the innermost frame; each deeper frame has a line.
      std::stringstream row(t);
      std::string first;
      row >> first;
      if (trace.functions.empty() && first.back() == ':')
        continue;
      if (trace.functions.empty())
      {
        trace.value = first;
        std::string name;
        std::getline(row, name);
        trace.functions.push_back(base_name(trim(name)));
      }
      else
      {
        trace.functions.push_back(base_name(t));
      }
    }
    // The output ends with a separator: the last "trace" is empty.
    if (!traces.empty() && traces.back().value.empty())
      traces.pop_back();
    return traces;
  }
} // namespace snmalloc_test
