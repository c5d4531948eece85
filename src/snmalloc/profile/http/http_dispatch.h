#pragma once
// Layer profile/http: request dispatch, from a parsed request to the
// response the handler makes of it (http_connection.h reads the request
// and writes the response; http_poll_loop.h polls the connections).
//
// The handler (http_routes.h's serve) fills a Response.  It may defer it:
// with `finish` set and `due_ns` in the future, the connection waits, not
// blocking the others, and finish(response) runs when due (heap?seconds=N).
// A handler or a finish that runs out of memory (std::bad_alloc) is
// answered 500; the server goes on.  Requests are handled one at a time,
// on the server's thread.

#include "http_request.h"

#include <cstdint>
#include <functional>
#include <new>
#include <string>

namespace snmalloc::profile::http
{
  struct Response
  {
    int status = 200;
    const char* content_type = "text/plain; charset=utf-8";
    std::string headers; // extra header lines, each ending in "\r\n"
    std::string body;
    // A response finished later: at due_ns (Pal::monotonic_ns) the server
    // calls finish(*this) and sends what it leaves.
    int64_t due_ns = 0;
    std::function<void(Response&)> finish;
  };

  using Handler = void (*)(const Request&, Response&);

  inline const char* status_text(int status)
  {
    switch (status)
    {
      case 200:
        return "OK";
      case 400:
        return "Bad Request";
      case 404:
        return "Not Found";
      case 405:
        return "Method Not Allowed";
      case 408:
        return "Request Timeout";
      case 414:
        return "URI Too Long";
      case 431:
        return "Request Header Fields Too Large";
      case 503:
        return "Service Unavailable";
      case 505:
        return "HTTP Version Not Supported";
      default:
        return "Internal Server Error";
    }
  }

  // A response of a status alone, its text as the body.
  inline Response status_response(int status)
  {
    Response r;
    r.status = status;
    r.body = status_text(status);
    r.body += '\n';
    if (status == 405)
      r.headers = "Allow: GET, HEAD\r\n";
    return r;
  }

  // The status answering a request head that did not parse (0: it did, or
  // it is not whole yet).
  inline int parse_error_status(ParseResult result)
  {
    switch (result)
    {
      case ParseResult::BadRequest:
        return 400;
      case ParseResult::UriTooLong:
        return 414;
      case ParseResult::HeadTooLarge:
        return 431;
      case ParseResult::VersionNotSupported:
        return 505;
      case ParseResult::Incomplete:
      case ParseResult::Complete:
        break;
    }
    return 0;
  }

  // Run a deferred response's finish, if it has one.  On std::bad_alloc
  // `r` becomes a 500.
  inline void finish_response(Response& r)
  {
    try
    {
      if (r.finish)
      {
        auto finish = std::move(r.finish);
        r.finish = nullptr;
        finish(r);
      }
    }
    catch (const std::bad_alloc&)
    {
      r = status_response(500);
    }
  }

  enum class Dispatched : uint8_t
  {
    Ready, // `response` is to be sent now
    Deferred, // `response` is due at its due_ns: then finish_response it
  };

  // Hand `request` to `handler`, which fills `response` (empty on entry).
  // A response deferred to a time already past is finished at once.
  inline Dispatched dispatch(
    Handler handler, const Request& request, int64_t now, Response& response)
  {
    try
    {
      handler(request, response);
    }
    catch (const std::bad_alloc&)
    {
      response = status_response(500);
      return Dispatched::Ready;
    }
    if (response.finish && response.due_ns > now)
      return Dispatched::Deferred;
    finish_response(response);
    return Dispatched::Ready;
  }
} // namespace snmalloc::profile::http
