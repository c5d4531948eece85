#pragma once
// Layer profile/http: the server.  One thread, one poll() loop,
// a bounded number of connections, each answered once and closed.
//
//   start(address, handler)   bind, listen, start the thread (signals
//                             blocked in it); the port chosen for port 0
//   stop()                    wake the thread, close everything, join
//
// The thread runs with the profiler's re-entrancy flag set for its whole
// life, so nothing it allocates is ever sampled, and it holds no lock of
// the allocator or the profiler while it runs: the handler (a dump, the
// statistics) takes and drops those locks as any caller does.
//
// Bounds, so a bad or hostile client costs a fixed amount and never the
// program's work (the limits in the constants below):
//   - MAX_CONNECTIONS at once; one more is accepted, answered 503 and
//     closed (a client flooding the port gets 503s, the slots stay full of
//     connections that time out);
//   - a request head is read into a fixed buffer (431 when it does not
//     fit) and must arrive within the timeout of the connection opening,
//     however slowly its bytes trickle in; an idle connection is closed;
//   - a response must be taken by the client within the timeout of being
//     ready; a reader that stalls is dropped.  The kernel's send buffer of
//     a connection is set to SEND_BUFFER_BYTES so this holds for responses
//     larger than that;
//   - requests are handled one at a time, so the memory in use is at most
//     MAX_CONNECTIONS responses (a profile each at most).
// A handler may defer its response (Response::finish, due at due_ns): the
// connection then waits without blocking the others (heap?seconds=N).
// After a response the connection lingers, half closed, reading and
// dropping what the client still sends (for at most a second): closing
// with unread bytes would reset the connection and could destroy the
// response in flight.
//
// fork(): the control lock is held across it; the child has no server
// thread, so it closes its copies of the sockets and forgets the server's
// state (leaking it: the thread may have been changing it).  A child may
// start a server of its own.  An atexit handler stops the server.

#include "http_address.h"
#include "http_request.h"
#include "../core/settings.h"

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <fcntl.h>
#include <functional>
#include <new>
#include <poll.h>
#include <pthread.h>
#include <string>
#include <sys/socket.h>
#include <unistd.h>

namespace snmalloc::profile::http
{
  constexpr size_t MAX_CONNECTIONS = 16;
  constexpr size_t MAX_LINGERING = 32;
  constexpr size_t REQUEST_CAPACITY = 8192;
  constexpr int SEND_BUFFER_BYTES = 64 * 1024;
  constexpr int64_t DEFAULT_TIMEOUT_NS = int64_t(10) * 1000000000;
  constexpr size_t MAX_TIMEOUT_SECONDS = 3600;
  constexpr int64_t LINGER_NS = 1000000000;

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

  class Server
  {
    enum class Phase : uint8_t
    {
      Reading,
      Waiting, // for a deferred response
      Writing,
    };

    struct Connection
    {
      int fd = -1;
      Phase phase = Phase::Reading;
      bool head_only = false;
      int64_t deadline_ns = 0;
      size_t received = 0;
      size_t sent = 0;
      Response pending;
      std::string out;
      char request[REQUEST_CAPACITY];
    };

    struct Lingering
    {
      int fd = -1;
      int64_t deadline_ns = 0;
    };

    // What the thread works on; made at start, freed at stop.
    struct State
    {
      int listen_fd = -1;
      int wake_read = -1;
      int wake_write = -1;
      Handler handler = nullptr;
      int64_t timeout_ns = DEFAULT_TIMEOUT_NS;
      Connection connections[MAX_CONNECTIONS];
      Lingering lingering[MAX_LINGERING];
    };

    pthread_mutex_t control_ = PTHREAD_MUTEX_INITIALIZER;
    State* state_ = nullptr;
    pthread_t thread_{};
    uint16_t port_ = 0;
    bool hooks_registered_ = false;

    static void close_quietly(int fd)
    {
      if (fd >= 0)
        ::close(fd);
    }

    // ---- the thread's side ----------------------------------------------

    static void linger(State& s, int fd, int64_t now)
    {
      ::shutdown(fd, SHUT_WR);
      for (Lingering& l : s.lingering)
      {
        if (l.fd < 0)
        {
          l = {fd, now + LINGER_NS};
          return;
        }
      }
      ::close(fd); // every lingering slot is taken: close at once
    }

    static void drop(Connection& c)
    {
      close_quietly(c.fd);
      c.fd = -1;
      c.pending = Response{};
      std::string().swap(c.out);
    }

    // Format `r` into c's output and start writing it.
    static void respond(Connection& c, Response& r, int64_t timeout_ns, int64_t now)
    {
      c.out = format_response(r, c.head_only);
      r = Response{};
      c.sent = 0;
      c.phase = Phase::Writing;
      c.deadline_ns = now + timeout_ns;
    }

    static void respond_status(Connection& c, int status, int64_t timeout_ns, int64_t now)
    {
      Response r;
      r.status = status;
      r.body = status_text(status);
      r.body += '\n';
      if (status == 405)
        r.headers = "Allow: GET, HEAD\r\n";
      respond(c, r, timeout_ns, now);
    }

    static void handle_request(State& s, Connection& c, int64_t now)
    {
      Request request;
      size_t head_size = 0;
      switch (parse_request(c.request, c.received, REQUEST_CAPACITY, request, head_size))
      {
        case ParseResult::Incomplete:
          return;
        case ParseResult::BadRequest:
          return respond_status(c, 400, s.timeout_ns, now);
        case ParseResult::UriTooLong:
          return respond_status(c, 414, s.timeout_ns, now);
        case ParseResult::HeadTooLarge:
          return respond_status(c, 431, s.timeout_ns, now);
        case ParseResult::VersionNotSupported:
          return respond_status(c, 505, s.timeout_ns, now);
        case ParseResult::Complete:
          break;
      }
      c.head_only = request.method.is("HEAD");
      try
      {
        s.handler(request, c.pending);
      }
      catch (const std::bad_alloc&)
      {
        return respond_status(c, 500, s.timeout_ns, now);
      }
      if (c.pending.finish && c.pending.due_ns > now)
      {
        c.phase = Phase::Waiting;
        c.deadline_ns = c.pending.due_ns;
        return;
      }
      finish_deferred(s, c, now);
    }

    static void finish_deferred(State& s, Connection& c, int64_t now)
    {
      try
      {
        if (c.pending.finish)
        {
          auto finish = std::move(c.pending.finish);
          c.pending.finish = nullptr;
          finish(c.pending);
        }
      }
      catch (const std::bad_alloc&)
      {
        return respond_status(c, 500, s.timeout_ns, now);
      }
      respond(c, c.pending, s.timeout_ns, now);
    }

    static void on_readable(State& s, Connection& c, int64_t now)
    {
      char discard[512];
      char* into = c.phase == Phase::Reading ? c.request + c.received : discard;
      size_t room = c.phase == Phase::Reading ? REQUEST_CAPACITY - c.received : sizeof(discard);
      ssize_t got = ::recv(c.fd, into, room, 0);
      if (got < 0 && (errno == EAGAIN || errno == EINTR))
        return;
      if (got <= 0)
        return drop(c); // the client went away (or reset)
      if (c.phase != Phase::Reading)
        return; // bytes after the head: not read
      c.received += size_t(got);
      handle_request(s, c, now);
    }

    static void on_writable(State& s, Connection& c, int64_t now)
    {
      while (c.sent < c.out.size())
      {
        ssize_t n = ::send(c.fd, c.out.data() + c.sent, c.out.size() - c.sent, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
          continue;
        if (n < 0 && errno == EAGAIN)
          return;
        if (n <= 0)
          return drop(c);
        c.sent += size_t(n);
      }
      linger(s, c.fd, now);
      c.fd = -1;
      drop(c);
    }

    // A connection beyond the bound: 503, then linger (or close).
    static void refuse(State& s, int fd, int64_t now)
    {
      Response r;
      r.status = 503;
      r.body = "too many connections\n";
      r.headers = "Retry-After: 1\r\n";
      std::string text = format_response(r, false);
      (void)!::send(fd, text.data(), text.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      linger(s, fd, now);
    }

    static void accept_all(State& s, int64_t now)
    {
      // Bounded per wake-up, so a flood cannot starve the connections.
      for (size_t i = 0; i < 2 * MAX_CONNECTIONS; i++)
      {
        int fd = ::accept4(s.listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
          return;
        int bytes = SEND_BUFFER_BYTES;
        ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof(bytes));
        Connection* free_slot = nullptr;
        for (Connection& c : s.connections)
        {
          if (c.fd < 0)
          {
            free_slot = &c;
            break;
          }
        }
        if (free_slot == nullptr)
        {
          refuse(s, fd, now);
          continue;
        }
        Connection& c = *free_slot;
        c.fd = fd;
        c.phase = Phase::Reading;
        c.head_only = false;
        c.received = 0;
        c.deadline_ns = now + s.timeout_ns;
      }
    }

    static void on_deadline(State& s, Connection& c, int64_t now)
    {
      if (c.phase == Phase::Waiting)
        return finish_deferred(s, c, now);
      if (c.phase == Phase::Reading && c.received > 0)
      {
        // Part of a request came: say why it is closed, if it can be said
        // at once.
        std::string text = format_response([] {
          Response r;
          r.status = 408;
          r.body = "request timeout\n";
          return r;
        }(), false);
        (void)!::send(c.fd, text.data(), text.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      }
      drop(c);
    }

    static int poll_timeout_ms(const State& s, int64_t now)
    {
      int64_t next = INT64_MAX;
      for (const Connection& c : s.connections)
      {
        if (c.fd >= 0 && c.deadline_ns < next)
          next = c.deadline_ns;
      }
      for (const Lingering& l : s.lingering)
      {
        if (l.fd >= 0 && l.deadline_ns < next)
          next = l.deadline_ns;
      }
      if (next == INT64_MAX)
        return -1;
      int64_t ms = next <= now ? 0 : (next - now + 999999) / 1000000;
      return ms > (1 << 30) ? (1 << 30) : int(ms);
    }

    static void* thread_main(void* argument)
    {
      in_profiler = true; // nothing this thread allocates is sampled
      State& s = *static_cast<State*>(argument);
      constexpr size_t FIXED = 2;
      pollfd fds[FIXED + MAX_CONNECTIONS + MAX_LINGERING];
      void* owner[FIXED + MAX_CONNECTIONS + MAX_LINGERING];
      for (;;)
      {
        size_t n = 0;
        fds[n++] = {s.wake_read, POLLIN, 0};
        fds[n++] = {s.listen_fd, POLLIN, 0};
        for (Connection& c : s.connections)
        {
          if (c.fd < 0)
            continue;
          owner[n] = &c;
          fds[n++] = {c.fd, short(c.phase == Phase::Writing ? POLLOUT : POLLIN), 0};
        }
        size_t first_lingering = n;
        for (Lingering& l : s.lingering)
        {
          if (l.fd < 0)
            continue;
          owner[n] = &l;
          fds[n++] = {l.fd, POLLIN, 0};
        }
        int ready = ::poll(fds, n, poll_timeout_ms(s, Pal::monotonic_ns()));
        if (ready < 0 && errno != EINTR)
          break;
        if (ready > 0 && fds[0].revents != 0)
          break; // stop() asked
        int64_t now = Pal::monotonic_ns();
        for (size_t i = FIXED; ready > 0 && i < first_lingering; i++)
        {
          auto& c = *static_cast<Connection*>(owner[i]);
          if (fds[i].revents == 0 || c.fd != fds[i].fd)
            continue;
          if (c.phase == Phase::Writing)
            on_writable(s, c, now);
          else
            on_readable(s, c, now);
        }
        for (size_t i = first_lingering; ready > 0 && i < n; i++)
        {
          auto& l = *static_cast<Lingering*>(owner[i]);
          if (fds[i].revents == 0)
            continue;
          char discard[512];
          ssize_t got = ::recv(l.fd, discard, sizeof(discard), 0);
          if (got == 0 || (got < 0 && errno != EAGAIN && errno != EINTR))
          {
            ::close(l.fd);
            l.fd = -1;
          }
        }
        if (ready > 0 && fds[1].revents != 0)
          accept_all(s, now);
        now = Pal::monotonic_ns();
        for (Connection& c : s.connections)
        {
          if (c.fd >= 0 && c.deadline_ns <= now)
            on_deadline(s, c, now);
        }
        for (Lingering& l : s.lingering)
        {
          if (l.fd >= 0 && l.deadline_ns <= now)
          {
            ::close(l.fd);
            l.fd = -1;
          }
        }
      }
      return nullptr;
    }

    // ---- the controlling side ---------------------------------------------

    static void close_all(State& s)
    {
      close_quietly(s.listen_fd);
      close_quietly(s.wake_read);
      close_quietly(s.wake_write);
      for (Connection& c : s.connections)
        close_quietly(c.fd);
      for (Lingering& l : s.lingering)
        close_quietly(l.fd);
    }

    static void before_fork()
    {
      ::pthread_mutex_lock(&instance().control_);
    }

    static void after_fork_in_parent()
    {
      ::pthread_mutex_unlock(&instance().control_);
    }

    static void in_fork_child()
    {
      Server& self = instance();
      if (self.state_ != nullptr)
      {
        close_all(*self.state_);
        self.state_ = nullptr; // leaked: its thread was not copied
        self.port_ = 0;
      }
      ::pthread_mutex_unlock(&self.control_);
    }

    static void stop_at_exit()
    {
      instance().stop();
    }

  public:
    // Held while starting the server's thread, which allocates: taken
    // before the allocator's locks.
    static constexpr unsigned FORK_ORDER = ForkLock::INNERMOST - 1;

  private:
    static constexpr ForkLock fork_lock{FORK_ORDER, before_fork, after_fork_in_parent, in_fork_child};

    int start_locked(const Address& address, Handler handler, int64_t timeout_ns)
    {
      if (state_ != nullptr)
        return EBUSY;
      if (!hooks_registered_)
      {
        if (
          !fork_locks.add(fork_lock) ||
          std::atexit(stop_at_exit) != 0)
          return ENOMEM;
        hooks_registered_ = true;
      }
      ProfilerGuard guard; // the server's memory is not the program's
      auto* s = new (std::nothrow) State();
      if (s == nullptr)
        return ENOMEM;
      s->handler = handler;
      s->timeout_ns = timeout_ns;
      int error = 0;
      int wake[2];
      int one = 1;
      sockaddr_storage bound{};
      socklen_t bound_size = sizeof(bound);
      s->listen_fd = ::socket(address.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
      if (
        s->listen_fd < 0 ||
        ::setsockopt(s->listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
        ::bind(s->listen_fd, reinterpret_cast<const sockaddr*>(&address.socket), address.size) != 0 ||
        ::listen(s->listen_fd, 64) != 0 ||
        ::getsockname(s->listen_fd, reinterpret_cast<sockaddr*>(&bound), &bound_size) != 0 ||
        ::pipe2(wake, O_CLOEXEC | O_NONBLOCK) != 0)
        error = errno;
      else
      {
        s->wake_read = wake[0];
        s->wake_write = wake[1];
        Address a;
        a.socket = bound;
        a.size = bound_size;
        port_ = a.port();
        // The thread inherits this mask: no signal is ever delivered to it.
        sigset_t all, old;
        sigfillset(&all);
        ::pthread_sigmask(SIG_SETMASK, &all, &old);
        error = ::pthread_create(&thread_, nullptr, thread_main, s);
        ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
        if (error == 0)
          ::pthread_setname_np(thread_, "snmalloc-http"); // for top -H, perf
      }
      if (error != 0)
      {
        close_all(*s);
        delete s;
        port_ = 0;
        return error;
      }
      state_ = s;
      return 0;
    }

  public:
    static Server& instance()
    {
      static Server single;
      return single;
    }

    // Listen on `address` and serve with `handler` (timeout_ns: see the
    // bounds above).  0, EBUSY if a server runs, or the errno of what
    // failed (EADDRINUSE, EACCES, ...).
    int start(const Address& address, Handler handler, int64_t timeout_ns = DEFAULT_TIMEOUT_NS)
    {
      ::pthread_mutex_lock(&control_);
      int error = start_locked(address, handler, timeout_ns);
      ::pthread_mutex_unlock(&control_);
      return error;
    }

    // Stop serving: connections are closed, the thread is joined.  0, or
    // ESRCH if no server runs.
    int stop()
    {
      ::pthread_mutex_lock(&control_);
      State* s = state_;
      if (s == nullptr)
      {
        ::pthread_mutex_unlock(&control_);
        return ESRCH;
      }
      char byte = 0;
      (void)!::write(s->wake_write, &byte, 1);
      ::pthread_join(thread_, nullptr);
      close_all(*s);
      {
        ProfilerGuard guard;
        delete s;
      }
      state_ = nullptr;
      port_ = 0;
      ::pthread_mutex_unlock(&control_);
      return 0;
    }

    // The port served on; 0 when not serving.
    uint16_t port()
    {
      ::pthread_mutex_lock(&control_);
      uint16_t p = port_;
      ::pthread_mutex_unlock(&control_);
      return p;
    }
  };
} // namespace snmalloc::profile::http
