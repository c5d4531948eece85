#pragma once
// Layer profile/http: the server.  One thread, one poll() loop,
// a bounded number of connections, each answered once and closed.
//
//   start(address, handler)   bind, listen, start the thread (signals
//                             blocked in it); the port chosen for port 0
//   stop()                    wake the thread, close everything, join
//
// The parts, each in its own header:
//   http_dispatch.h     a parsed request to the handler's response
//   http_connection.h   a connection: reading the request, writing the
//                       response, lingering after it
//   http_poll_loop.h    the thread's body: poll, accept, deadlines
//   http_server.h       this: starting and stopping the thread, fork
//
// The thread runs with the profiler's re-entrancy flag set for its whole
// life, so nothing it allocates is ever sampled, and it holds no lock of
// the allocator or the profiler while it runs: the handler (a dump, the
// statistics) takes and drops those locks as any caller does.
//
// Bounds, so a bad or hostile client costs a fixed amount and never the
// program's work:
//   - MAX_CONNECTIONS at once (http_poll_loop.h), a request head of at
//     most REQUEST_CAPACITY bytes (http_connection.h);
//   - a request head must arrive within the timeout of the connection
//     opening, however slowly its bytes trickle in, and a response be
//     taken within the timeout of being ready; an idle connection is
//     closed;
//   - requests are handled one at a time, so the memory in use is at most
//     MAX_CONNECTIONS responses (a profile each at most).
//
// fork(): the control lock is held across it; the child has no server
// thread, so it closes its copies of the sockets and forgets the server's
// state (leaking it: the thread may have been changing it).  A child may
// start a server of its own.  An atexit handler stops the server.

#include "http_address.h"
#include "http_dispatch.h"
#include "http_poll_loop.h"
#include "../core/settings.h"

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <new>
#include <pthread.h>
#include <unistd.h>

namespace snmalloc::profile::http
{
  constexpr size_t MAX_TIMEOUT_SECONDS = 3600;

  class Server
  {
    pthread_mutex_t control_ = PTHREAD_MUTEX_INITIALIZER;
    ServerState* state_ = nullptr;
    pthread_t thread_{};
    uint16_t port_ = 0;
    bool hooks_registered_ = false;

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
        self.state_->close_all();
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

    // Takes control_ once the fork lock is in the registry, never before: a
    // fork must not find control_ held and not take it.  False, and nothing
    // taken, when the fork handlers could not be registered.
    bool lock_control()
    {
      if (!fork_locks.add(fork_lock))
        return false;
      ::pthread_mutex_lock(&control_);
      return true;
    }

    // Start the thread on `s`.  0 or pthread_create's error.
    int start_thread(ServerState* s)
    {
      // The thread inherits this mask: no signal is ever delivered to it.
      sigset_t all, old;
      sigfillset(&all);
      ::pthread_sigmask(SIG_SETMASK, &all, &old);
      int error = ::pthread_create(&thread_, nullptr, poll_loop, s);
      ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
      if (error == 0)
        ::pthread_setname_np(thread_, "snmalloc-http"); // for top -H, perf
      return error;
    }

    int start_locked(const Address& address, Handler handler, int64_t timeout_ns)
    {
      if (state_ != nullptr)
        return EBUSY;
      if (!hooks_registered_)
      {
        if (std::atexit(stop_at_exit) != 0)
          return ENOMEM;
        hooks_registered_ = true;
      }
      ProfilerGuard guard; // the server's memory is not the program's
      auto* s = new (std::nothrow) ServerState();
      if (s == nullptr)
        return ENOMEM;
      s->handler = handler;
      s->timeout_ns = timeout_ns;
      int error = s->open_sockets(address, port_);
      if (error == 0)
        error = start_thread(s);
      if (error != 0)
      {
        s->close_all();
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
      if (!lock_control())
        return ENOMEM;
      int error = start_locked(address, handler, timeout_ns);
      ::pthread_mutex_unlock(&control_);
      return error;
    }

    // Stop serving: connections are closed, the thread is joined.  0, or
    // ESRCH if no server runs.
    int stop()
    {
      if (!lock_control())
        return ESRCH; // no server started without it
      ServerState* s = state_;
      if (s == nullptr)
      {
        ::pthread_mutex_unlock(&control_);
        return ESRCH;
      }
      char byte = 0;
      (void)!::write(s->wake_write, &byte, 1);
      ::pthread_join(thread_, nullptr);
      s->close_all();
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
      if (!lock_control())
        return 0;
      uint16_t p = port_;
      ::pthread_mutex_unlock(&control_);
      return p;
    }
  };
} // namespace snmalloc::profile::http
