#pragma once
// Layer profile/http: the request parser.  It reads the head of
// one HTTP/1.x request (request line and header fields, RFC 9112) from a
// fixed buffer, allocating nothing, and says whether the head is complete,
// still arriving, or bad, and how bad (the status to answer with):
//
//   400  request line or a header field malformed, a body announced (the
//        endpoint serves GET and HEAD only, so it reads no body)
//   414  the request line alone fills the buffer
//   431  the head does not fit in the buffer
//   505  an HTTP version other than 1.x
//
// Lines end in CRLF or a bare LF (RFC 9112 section 2.2 lets a server take
// LF).  The method is any token: which methods a path allows is the
// router's business (405).  The target must be in origin form
// ("/path?query"); the path and query point into the buffer.

#include "../base/text_view.h"

#include <cstdint>
#include <cstring>

namespace snmalloc::profile::http
{
  struct Request
  {
    Text method;
    Text path;
    Text query; // after '?', without it; empty if none
  };

  enum class ParseResult
  {
    Incomplete, // more bytes are needed (and the buffer has room)
    Complete,
    BadRequest, // 400
    UriTooLong, // 414
    HeadTooLarge, // 431
    VersionNotSupported, // 505
  };

  namespace request_detail
  {
    // RFC 9110 section 5.6.2: tchar.
    inline bool is_token_char(char c)
    {
      if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
        return true;
      return c != '\0' && std::strchr("!#$%&'*+-.^_`|~", c) != nullptr;
    }

    // Visible characters of a request target (no spaces, no controls).
    inline bool is_target_char(char c)
    {
      return static_cast<unsigned char>(c) > 0x20 && static_cast<unsigned char>(c) < 0x7f;
    }

    // A header field value may hold visible characters, spaces, tabs and
    // obs-text (bytes >= 0x80); no other controls.
    inline bool is_value_char(char c)
    {
      auto u = static_cast<unsigned char>(c);
      return u == '\t' || (u >= 0x20 && u != 0x7f);
    }

    inline bool equals_ignoring_case(Text t, const char* word)
    {
      size_t n = std::strlen(word);
      if (t.size != n)
        return false;
      for (size_t i = 0; i < n; i++)
      {
        char c = t.data[i];
        if (c >= 'A' && c <= 'Z')
          c = char(c - 'A' + 'a');
        if (c != word[i])
          return false;
      }
      return true;
    }

    // The line starting at `from`, without its CRLF or LF; `next` is where
    // the next line starts.  false if no line end is in the buffer yet.
    inline bool line_at(const char* data, size_t size, size_t from, Text& line, size_t& next)
    {
      const void* lf = std::memchr(data + from, '\n', size - from);
      if (lf == nullptr)
        return false;
      size_t end = size_t(static_cast<const char*>(lf) - data);
      next = end + 1;
      if (end > from && data[end - 1] == '\r')
        end--;
      line = {data + from, end - from};
      return true;
    }

    inline ParseResult parse_request_line(Text line, Request& out)
    {
      size_t i = 0;
      while (i < line.size && is_token_char(line.data[i]))
        i++;
      if (i == 0 || i >= line.size || line.data[i] != ' ')
        return ParseResult::BadRequest;
      out.method = {line.data, i};
      size_t target = ++i;
      while (i < line.size && is_target_char(line.data[i]))
        i++;
      if (i == target || i >= line.size || line.data[i] != ' ' || line.data[target] != '/')
        return ParseResult::BadRequest;
      Text whole{line.data + target, i - target};
      const void* q = std::memchr(whole.data, '?', whole.size);
      if (q == nullptr)
      {
        out.path = whole;
        out.query = {whole.data + whole.size, 0};
      }
      else
      {
        size_t at = size_t(static_cast<const char*>(q) - whole.data);
        out.path = {whole.data, at};
        out.query = {whole.data + at + 1, whole.size - at - 1};
      }
      Text version{line.data + i + 1, line.size - i - 1};
      // HTTP-version = "HTTP/" DIGIT "." DIGIT
      if (
        version.size != 8 || std::memcmp(version.data, "HTTP/", 5) != 0 ||
        version.data[5] < '0' || version.data[5] > '9' || version.data[6] != '.' ||
        version.data[7] < '0' || version.data[7] > '9')
        return ParseResult::BadRequest;
      if (version.data[5] != '1')
        return ParseResult::VersionNotSupported;
      return ParseResult::Complete;
    }

    // "name: value" with a token name, no space before the colon and no
    // line folding.  A body (Content-Length other than 0, or any
    // Transfer-Encoding) is refused: GET and HEAD have none here.
    inline ParseResult parse_header_line(Text line)
    {
      size_t i = 0;
      while (i < line.size && is_token_char(line.data[i]))
        i++;
      if (i == 0 || i >= line.size || line.data[i] != ':')
        return ParseResult::BadRequest;
      Text name{line.data, i};
      size_t v = i + 1;
      while (v < line.size && (line.data[v] == ' ' || line.data[v] == '\t'))
        v++;
      size_t end = line.size;
      while (end > v && (line.data[end - 1] == ' ' || line.data[end - 1] == '\t'))
        end--;
      for (size_t k = v; k < end; k++)
      {
        if (!is_value_char(line.data[k]))
          return ParseResult::BadRequest;
      }
      Text value{line.data + v, end - v};
      if (equals_ignoring_case(name, "transfer-encoding"))
        return ParseResult::BadRequest;
      if (equals_ignoring_case(name, "content-length") && !value.is("0"))
        return ParseResult::BadRequest;
      return ParseResult::Complete;
    }
  } // namespace request_detail

  // Parse the head in data[0, size).  `capacity` is the buffer's size: a
  // head still incomplete when it is full is too large.  On Complete, `out`
  // points into data and `head_size` is the bytes of the head.
  inline ParseResult
  parse_request(const char* data, size_t size, size_t capacity, Request& out, size_t& head_size)
  {
    using namespace request_detail;
    bool full = size >= capacity;
    Text line;
    size_t next = 0;
    // RFC 9112 section 2.2: empty lines before the request line are ignored.
    size_t from = 0;
    for (;;)
    {
      if (!line_at(data, size, from, line, next))
        return full ? ParseResult::UriTooLong : ParseResult::Incomplete;
      if (line.size != 0)
        break;
      from = next;
    }
    // A line that cannot be a request line fails now, before its headers.
    Request request;
    ParseResult r = parse_request_line(line, request);
    if (r != ParseResult::Complete)
      return r;
    for (;;)
    {
      from = next;
      if (!line_at(data, size, from, line, next))
        return full ? ParseResult::HeadTooLarge : ParseResult::Incomplete;
      if (line.size == 0)
        break;
      if (line.data[0] == ' ' || line.data[0] == '\t')
        return ParseResult::BadRequest; // obsolete line folding
      r = parse_header_line(line);
      if (r != ParseResult::Complete)
        return r;
    }
    out = request;
    head_size = next;
    return ParseResult::Complete;
  }

  // The value of `key` in a query string ("a=1&seconds=30"); false if absent.
  inline bool query_value(Text query, const char* key, Text& value)
  {
    size_t key_size = std::strlen(key);
    size_t i = 0;
    while (i <= query.size)
    {
      size_t end = i;
      while (end < query.size && query.data[end] != '&')
        end++;
      Text item{query.data + i, end - i};
      if (
        item.size > key_size && std::memcmp(item.data, key, key_size) == 0 &&
        item.data[key_size] == '=')
      {
        value = {item.data + key_size + 1, item.size - key_size - 1};
        return true;
      }
      i = end + 1;
    }
    return false;
  }
} // namespace snmalloc::profile::http
