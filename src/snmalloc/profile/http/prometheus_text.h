#pragma once
// Layer profile/http: a writer of the Prometheus text exposition
// format (version 0.0.4): per metric family one "# HELP" and one "# TYPE"
// line, then its samples, "name{label="value",...} number".  Names are
// given whole (a counter's with its "_total"); label values are escaped
// (backslash, double quote, line feed), as the format requires.

#include <cstdint>
#include <cstdio>
#include <string>

namespace snmalloc::profile::http
{
  class PrometheusText
  {
    std::string& out_;

    void escaped(const char* value)
    {
      for (const char* c = value; *c != '\0'; c++)
      {
        if (*c == '\\')
          out_ += "\\\\";
        else if (*c == '"')
          out_ += "\\\"";
        else if (*c == '\n')
          out_ += "\\n";
        else
          out_ += *c;
      }
    }

    void value(uint64_t v)
    {
      char digits[24];
      std::snprintf(digits, sizeof(digits), " %llu\n", static_cast<unsigned long long>(v));
      out_ += digits;
    }

  public:
    explicit PrometheusText(std::string& out) : out_(out) {}

    // type: "counter" or "gauge".  help: one line, no line feeds.
    void family(const char* name, const char* type, const char* help)
    {
      out_ += "# HELP ";
      out_ += name;
      out_ += ' ';
      out_ += help;
      out_ += "\n# TYPE ";
      out_ += name;
      out_ += ' ';
      out_ += type;
      out_ += '\n';
    }

    void sample(const char* name, uint64_t v)
    {
      out_ += name;
      value(v);
    }

    // One label; labelled series of a family follow its family() line.
    void sample(const char* name, const char* label, const char* label_value, uint64_t v)
    {
      out_ += name;
      out_ += '{';
      out_ += label;
      out_ += "=\"";
      escaped(label_value);
      out_ += "\"}";
      value(v);
    }

    // A family with a single unlabelled sample.
    void single(const char* name, const char* type, const char* help, uint64_t v)
    {
      family(name, type, help);
      sample(name, v);
    }
  };
} // namespace snmalloc::profile::http
