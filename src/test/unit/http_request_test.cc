// The HTTP request parser (profile/http/http_request.h) on named cases; the
// server's answers to bad clients are tested end to end in
// src/test/func/http (bad_clients.py), and the parser is fuzzed
// (fuzz-http-request).

#include <catch2/catch.hpp>
#include <snmalloc/profile/http/http_request.h>
#include <string>

using namespace snmalloc::profile;
using namespace snmalloc::profile::http;

namespace
{
  ParseResult parse(const std::string& text, Request& r, size_t capacity = 8192)
  {
    size_t head = 0;
    return parse_request(text.data(), text.size(), capacity, r, head);
  }

  std::string str(Text t)
  {
    return std::string(t.data, t.size);
  }
}

TEST_CASE("http: a request's method, path and query", "[http]")
{
  Request r;
  std::string text = "GET /debug/pprof/heap?seconds=30&gc=1 HTTP/1.1\r\nHost: x\r\n\r\n";
  size_t head = 0;
  REQUIRE(parse_request(text.data(), text.size(), 8192, r, head) == ParseResult::Complete);
  CHECK(head == text.size());
  CHECK(str(r.method) == "GET");
  CHECK(str(r.path) == "/debug/pprof/heap");
  CHECK(str(r.query) == "seconds=30&gc=1");
  Text v;
  REQUIRE(query_value(r.query, "seconds", v));
  CHECK(str(v) == "30");
  REQUIRE(query_value(r.query, "gc", v));
  CHECK(str(v) == "1");
  CHECK_FALSE(query_value(r.query, "second", v));
}

TEST_CASE("http: every prefix of a request is incomplete", "[http]")
{
  std::string text = "\r\nHEAD /metrics HTTP/1.0\nAccept: */*\n\n";
  Request r;
  for (size_t n = 0; n < text.size(); n++)
    CHECK(parse(text.substr(0, n), r) == ParseResult::Incomplete);
  CHECK(parse(text, r) == ParseResult::Complete);
  CHECK(str(r.method) == "HEAD");
}

TEST_CASE("http: malformed heads, and the status each gets", "[http]")
{
  Request r;
  CHECK(parse("GET\r\n\r\n", r) == ParseResult::BadRequest);
  CHECK(parse("GET  / HTTP/1.1\r\n\r\n", r) == ParseResult::BadRequest);
  CHECK(parse("G(T / HTTP/1.1\r\n\r\n", r) == ParseResult::BadRequest);
  CHECK(parse("GET http://x/ HTTP/1.1\r\n\r\n", r) == ParseResult::BadRequest);
  CHECK(parse("GET / HTTP/1.10\r\n\r\n", r) == ParseResult::BadRequest);
  CHECK(parse("GET / HTTP/3.0\r\n\r\n", r) == ParseResult::VersionNotSupported);
  CHECK(parse("GET / HTTP/1.1\r\n: empty name\r\n\r\n", r) == ParseResult::BadRequest);
  CHECK(parse("GET / HTTP/1.1\r\nA: 1\r\n\tfolded\r\n\r\n", r) == ParseResult::BadRequest);
  CHECK(parse("GET / HTTP/1.1\r\ncontent-LENGTH: 1\r\n\r\nx", r) == ParseResult::BadRequest);
  CHECK(parse("GET / HTTP/1.1\r\nContent-Length: 0\r\n\r\n", r) == ParseResult::Complete);
  // A full buffer without a line end, and one holding the request line only.
  CHECK(parse("GET /aaaaaaaa", r, 13) == ParseResult::UriTooLong);
  CHECK(parse("GET / HTTP/1.1\r\nX: y", r, 20) == ParseResult::HeadTooLarge);
}
