#pragma once
// Layer profile/http: the poll loop, the server thread's body
// (http_server.h starts and stops the thread).  One poll() over the wake
// pipe, the listening socket, the open connections and the lingering ones;
// what is ready is served (http_connection.h), new connections accepted,
// and what is past its deadline closed, or finished if it is a deferred
// response.  The loop ends when a byte comes down the wake pipe.
//
// MAX_CONNECTIONS at once; one more is accepted, answered 503 and closed
// (a client flooding the port gets 503s, the slots stay full of
// connections that time out).  Accepts are bounded per wake-up, so a flood
// cannot starve the connections.

#include "http_address.h"
#include "http_connection.h"
#include "../core/settings.h"

#include <cerrno>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

namespace snmalloc::profile::http
{
  constexpr size_t MAX_CONNECTIONS = 16;
  constexpr int64_t DEFAULT_TIMEOUT_NS = int64_t(10) * 1000000000;

  // What the thread works on: made by start, freed by stop.
  struct ServerState
  {
    int listen_fd = -1;
    int wake_read = -1;
    int wake_write = -1;
    Handler handler = nullptr;
    int64_t timeout_ns = DEFAULT_TIMEOUT_NS;
    Connection connections[MAX_CONNECTIONS];
    Lingering lingering[MAX_LINGERING];

    // Listen on `address` and open the wake pipe; `port` is the port bound
    // (the one chosen, for port 0).  0 or the errno of what failed.
    int open_sockets(const Address& address, uint16_t& port)
    {
      int wake[2];
      int one = 1;
      sockaddr_storage bound{};
      socklen_t bound_size = sizeof(bound);
      listen_fd = ::socket(address.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
      if (
        listen_fd < 0 ||
        ::setsockopt(listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
        ::bind(listen_fd, reinterpret_cast<const sockaddr*>(&address.socket), address.size) != 0 ||
        ::listen(listen_fd, 64) != 0 ||
        ::getsockname(listen_fd, reinterpret_cast<sockaddr*>(&bound), &bound_size) != 0 ||
        ::pipe2(wake, O_CLOEXEC | O_NONBLOCK) != 0)
        return errno;
      wake_read = wake[0];
      wake_write = wake[1];
      Address a;
      a.socket = bound;
      a.size = bound_size;
      port = a.port();
      return 0;
    }

    void close_all()
    {
      close_quietly(listen_fd);
      close_quietly(wake_read);
      close_quietly(wake_write);
      for (Connection& c : connections)
        close_quietly(c.fd);
      for (Lingering& l : lingering)
        close_quietly(l.fd);
    }
  };

  namespace poll_detail
  {
    // A connection beyond the bound: 503, then linger (or close).
    inline void refuse(ServerState& s, int fd, int64_t now)
    {
      Response r;
      r.status = 503;
      r.body = "too many connections\n";
      r.headers = "Retry-After: 1\r\n";
      send_at_once(fd, r);
      linger(s.lingering, fd, now);
    }

    // Take the new connections, each in a free slot, its request due
    // within the timeout.
    inline void accept_all(ServerState& s, int64_t now)
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
        free_slot->open(fd, now + s.timeout_ns);
      }
    }

    // Until the next deadline, for poll(); -1: none.
    inline int poll_timeout_ms(const ServerState& s, int64_t now)
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

    // The sockets one poll() watches: the wake pipe, the listening socket,
    // then each open connection and each lingering one, with which of them
    // each entry is.
    struct PollSet
    {
      static constexpr size_t FIXED = 2;
      static constexpr size_t CAPACITY = FIXED + MAX_CONNECTIONS + MAX_LINGERING;
      pollfd fds[CAPACITY];
      void* owner[CAPACITY];
      size_t first_lingering = FIXED;
      size_t size = FIXED;

      void collect(ServerState& s)
      {
        size = 0;
        fds[size++] = {s.wake_read, POLLIN, 0};
        fds[size++] = {s.listen_fd, POLLIN, 0};
        for (Connection& c : s.connections)
        {
          if (c.fd < 0)
            continue;
          owner[size] = &c;
          short events = c.phase == Connection::Phase::Writing ? POLLOUT : POLLIN;
          fds[size++] = {c.fd, events, 0};
        }
        first_lingering = size;
        for (Lingering& l : s.lingering)
        {
          if (l.fd < 0)
            continue;
          owner[size] = &l;
          fds[size++] = {l.fd, POLLIN, 0};
        }
      }
    };

    // Serve the sockets poll() found ready: connections, lingering ones,
    // then new connections.
    inline void serve_ready(ServerState& s, PollSet& set, int64_t now)
    {
      for (size_t i = PollSet::FIXED; i < set.first_lingering; i++)
      {
        auto& c = *static_cast<Connection*>(set.owner[i]);
        if (set.fds[i].revents == 0 || c.fd != set.fds[i].fd)
          continue;
        if (c.phase == Connection::Phase::Writing)
          c.on_writable(s.lingering, now);
        else
          c.on_readable(s.handler, s.timeout_ns, now);
      }
      for (size_t i = set.first_lingering; i < set.size; i++)
      {
        if (set.fds[i].revents != 0)
          static_cast<Lingering*>(set.owner[i])->on_readable();
      }
      if (set.fds[1].revents != 0)
        accept_all(s, now);
    }

    // Close or finish whatever is past its deadline.
    inline void expire(ServerState& s, int64_t now)
    {
      for (Connection& c : s.connections)
      {
        if (c.fd >= 0 && c.deadline_ns <= now)
          c.on_deadline(s.timeout_ns, now);
      }
      for (Lingering& l : s.lingering)
      {
        if (l.fd >= 0 && l.deadline_ns <= now)
          l.close();
      }
    }
  } // namespace poll_detail

  // The server thread's body (`argument`: its ServerState): poll, serve
  // what is ready, close or finish what is past its deadline, until the
  // wake pipe says stop.
  inline void* poll_loop(void* argument)
  {
    in_profiler = true; // nothing this thread allocates is sampled
    ServerState& s = *static_cast<ServerState*>(argument);
    poll_detail::PollSet set;
    for (;;)
    {
      set.collect(s);
      int ready = ::poll(set.fds, set.size, poll_detail::poll_timeout_ms(s, Pal::monotonic_ns()));
      if (ready < 0 && errno != EINTR)
        break;
      if (ready > 0 && set.fds[0].revents != 0)
        break; // stop() asked
      if (ready > 0)
        poll_detail::serve_ready(s, set, Pal::monotonic_ns());
      poll_detail::expire(s, Pal::monotonic_ns());
    }
    return nullptr;
  }
} // namespace snmalloc::profile::http
