#pragma once
// Layer profile/http: connection handling.  A connection's buffers, reading
// its request, writing its response, and what is left of it after the
// response (http_dispatch.h turns the request into the response;
// http_poll_loop.h polls the connections and calls these when one is
// ready or its deadline passes).
//
// A connection is answered once and closed, in three phases:
//   Reading   the request head comes into a fixed buffer of
//             REQUEST_CAPACITY bytes (431 when it does not fit) and must
//             arrive whole by the deadline, however slowly its bytes
//             trickle in;
//   Waiting   for a deferred response, until it is due;
//   Writing   the response must be taken by the client by the deadline;
//             a reader that stalls is dropped.  The kernel's send buffer
//             of a connection is set to SEND_BUFFER_BYTES (by the server,
//             at accept) so this holds for responses larger than that.
// After a response the connection lingers, half closed, reading and
// dropping what the client still sends (for at most LINGER_NS): closing
// with unread bytes would reset the connection and could destroy the
// response in flight.

#include "http_dispatch.h"
#include "http_request.h"

#include <cerrno>
#include <cstdio>
#include <string>
#include <sys/socket.h>
#include <unistd.h>

namespace snmalloc::profile::http
{
  constexpr size_t MAX_LINGERING = 32;
  constexpr size_t REQUEST_CAPACITY = 8192;
  constexpr int SEND_BUFFER_BYTES = 64 * 1024;
  constexpr int64_t LINGER_NS = 1000000000;

  // A whole response: status line, headers, and the body unless head_only.
  inline std::string format_response(const Response& r, bool head_only)
  {
    char line[256];
    std::snprintf(
      line,
      sizeof(line),
      "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
      "Connection: close\r\nX-Content-Type-Options: nosniff\r\n",
      r.status,
      status_text(r.status),
      r.content_type,
      r.body.size());
    std::string out = line;
    out += r.headers;
    out += "\r\n";
    if (!head_only)
      out += r.body;
    return out;
  }

  inline void close_quietly(int fd)
  {
    if (fd >= 0)
      ::close(fd);
  }

  // Send a short response in one go, without waiting: for a connection
  // about to be closed (refused, or timed out part way through its request).
  inline void send_at_once(int fd, const Response& r)
  {
    std::string text = format_response(r, false);
    (void)!::send(fd, text.data(), text.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  }

  // A connection after its response: half closed, read until the client
  // closes its side or the deadline passes.
  struct Lingering
  {
    int fd = -1;
    int64_t deadline_ns = 0;

    // Read and drop what came; close at the end of the stream or an error.
    void on_readable()
    {
      char discard[512];
      ssize_t got = ::recv(fd, discard, sizeof(discard), 0);
      if (got == 0 || (got < 0 && errno != EAGAIN && errno != EINTR))
        close();
    }

    void close()
    {
      ::close(fd);
      fd = -1;
    }
  };

  // Shut `fd` for writing and let it linger in a free slot of `slots`, or
  // close it at once if every slot is taken.
  inline void linger(Lingering (&slots)[MAX_LINGERING], int fd, int64_t now)
  {
    ::shutdown(fd, SHUT_WR);
    for (Lingering& l : slots)
    {
      if (l.fd < 0)
      {
        l = {fd, now + LINGER_NS};
        return;
      }
    }
    ::close(fd);
  }

  struct Connection
  {
    enum class Phase : uint8_t
    {
      Reading,
      Waiting, // for a deferred response
      Writing,
    };

    int fd = -1;
    Phase phase = Phase::Reading;
    bool head_only = false;
    int64_t deadline_ns = 0;
    size_t received = 0;
    size_t sent = 0;
    Response pending;
    std::string out;
    char request[REQUEST_CAPACITY];

    // Take a new connection `socket`, whose request must come by `deadline`.
    void open(int socket, int64_t deadline)
    {
      fd = socket;
      phase = Phase::Reading;
      head_only = false;
      received = 0;
      deadline_ns = deadline;
    }

    // Close it and free its response.
    void drop()
    {
      close_quietly(fd);
      fd = -1;
      pending = Response{};
      std::string().swap(out);
    }

    // Format `r` into the output and start writing it.
    void respond(Response& r, int64_t timeout_ns, int64_t now)
    {
      out = format_response(r, head_only);
      r = Response{};
      sent = 0;
      phase = Phase::Writing;
      deadline_ns = now + timeout_ns;
    }

    // Reading or Waiting: bytes from the client.  A request's bytes go to
    // its buffer, and each time the head is parsed again; once it is whole
    // it is answered.  Bytes after the head are dropped.
    void on_readable(Handler handler, int64_t timeout_ns, int64_t now)
    {
      char discard[512];
      char* into = phase == Phase::Reading ? request + received : discard;
      size_t room = phase == Phase::Reading ? REQUEST_CAPACITY - received : sizeof(discard);
      ssize_t got = ::recv(fd, into, room, 0);
      if (got < 0 && (errno == EAGAIN || errno == EINTR))
        return;
      if (got <= 0)
        return drop(); // the client went away (or reset)
      if (phase != Phase::Reading)
        return;
      received += size_t(got);
      take_request(handler, timeout_ns, now);
    }

    // Writing: send what the socket takes; once all is sent, linger.
    void on_writable(Lingering (&lingering)[MAX_LINGERING], int64_t now)
    {
      while (sent < out.size())
      {
        ssize_t n = ::send(fd, out.data() + sent, out.size() - sent, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
          continue;
        if (n < 0 && errno == EAGAIN)
          return;
        if (n <= 0)
          return drop();
        sent += size_t(n);
      }
      linger(lingering, fd, now);
      fd = -1;
      drop();
    }

    // The deadline passed: a deferred response is due and sent; anything
    // else is closed, with a 408 if part of a request came.
    void on_deadline(int64_t timeout_ns, int64_t now)
    {
      if (phase == Phase::Waiting)
      {
        finish_response(pending);
        return respond(pending, timeout_ns, now);
      }
      if (phase == Phase::Reading && received > 0)
      {
        // Say why it is closed, if it can be said at once.
        Response r;
        r.status = 408;
        r.body = "request timeout\n";
        send_at_once(fd, r);
      }
      drop();
    }

  private:
    // Parse the head received so far; once it is whole, answer it: an
    // error status, or the handler's response, now or when it is due.
    void take_request(Handler handler, int64_t timeout_ns, int64_t now)
    {
      Request parsed;
      size_t head_size = 0;
      ParseResult result =
        parse_request(request, received, REQUEST_CAPACITY, parsed, head_size);
      if (result == ParseResult::Incomplete)
        return;
      if (result != ParseResult::Complete)
      {
        Response r = status_response(parse_error_status(result));
        return respond(r, timeout_ns, now);
      }
      head_only = parsed.method.is("HEAD");
      if (dispatch(handler, parsed, now, pending) == Dispatched::Deferred)
      {
        phase = Phase::Waiting;
        deadline_ns = pending.due_ns;
        return;
      }
      respond(pending, timeout_ns, now);
    }
  };
} // namespace snmalloc::profile::http
