#pragma once
// Layer override: the HTTP endpoint's entry points, joining the server
// (profile/http/http_server.h, http_routes.h) to the allocator's statistics,
// which only this layer can read.
//
//   http_start("127.0.0.1:6060")   serve until http_stop() or exit; ":0"
//                                  picks a free port (http_port() says it)
//   SNMALLOC_PROFILE=http=:0       the same at start-up (env_config.h), the
//                                  port chosen printed once on stderr
//
// Loopback unless an address is named; a non-loopback address is served as
// asked, with a warning on stderr: whoever reaches it reads the program's
// heap profile, and its function names.

#include "../global/stats.h"
#include "../profile/config/env_config.h"
#include "../profile/http/http_routes.h"
#include "../profile/http/http_server.h"

namespace snmalloc::profile
{
  namespace http_detail
  {
    inline void say(const char* a, const char* b = "", const char* c = "", const char* d = "")
    {
      for (const char* s : {"snmalloc: ", a, b, c, d, "\n"})
        (void)!::write(2, s, std::strlen(s));
    }

    inline void read_statistics(struct ::snmalloc_stats* out)
    {
      *out = snmalloc::stats();
    }
  } // namespace http_detail

  // Serve profiles and statistics at `address` (see above), with
  // `timeout_seconds` for a client to send its request and to take the
  // response.  0; EINVAL for a bad address or timeout; EBUSY if already
  // serving; or the errno of bind/listen (EADDRINUSE, ...).  `port_out`, if
  // given, receives the port.
  inline int http_start(
    const char* address,
    uint16_t* port_out = nullptr,
    size_t timeout_seconds = http::DEFAULT_TIMEOUT_NS / 1000000000)
  {
    http::Address a;
    if (
      address == nullptr || !http::parse_address({address, std::strlen(address)}, a) ||
      timeout_seconds == 0 || timeout_seconds > http::MAX_TIMEOUT_SECONDS)
      return EINVAL;
    http::read_statistics = http_detail::read_statistics;
    int error = http::Server::instance().start(
      a, http::serve, int64_t(timeout_seconds) * 1000000000);
    if (error != 0)
      return error;
    uint16_t port = http::Server::instance().port();
    if (!a.is_loopback())
    {
      char where[http::ADDRESS_CAPACITY];
      a.set_port(port);
      a.format(where, sizeof(where));
      http_detail::say(
        "warning: serving heap profiles on ", where,
        ", which is not loopback: anyone who can reach it can read them");
    }
    if (port_out != nullptr)
      *port_out = port;
    return 0;
  }

  // Stop serving.  0, or ESRCH if not serving.
  inline int http_stop()
  {
    return http::Server::instance().stop();
  }

  // The port served on; 0 when not serving.
  inline uint16_t http_port()
  {
    return http::Server::instance().port();
  }

  // Start the endpoint a configuration asks for (http=...), once: a
  // configuration applied again leaves a running endpoint as it is.
  // Failures are said on stderr.  0 or the errno of http_start.
  SNMALLOC_ONCE_PATH inline int http_start_configured(const EnvConfig& c)
  {
    if (c.http[0] == '\0' || http_port() != 0)
      return 0;
    uint16_t port = 0;
    int error = http_start(c.http, &port, c.http_timeout_seconds);
    if (error != 0)
    {
      http_detail::say("SNMALLOC_PROFILE: cannot serve on http=", c.http, ": ", std::strerror(error));
      return error;
    }
    http::Address asked;
    http::parse_address({c.http, std::strlen(c.http)}, asked);
    if (asked.port() == 0)
    {
      char where[http::ADDRESS_CAPACITY];
      asked.set_port(port);
      asked.format(where, sizeof(where));
      http_detail::say("serving heap profiles on http://", where, "/debug/pprof/");
    }
    return 0;
  }
} // namespace snmalloc::profile
