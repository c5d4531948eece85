#pragma once
// Layer override: dumps nobody asked for in code: at exit and on a signal,
// as configured by SNMALLOC_PROFILE in the environment (env_config.h).
//
// A signal handler must not allocate or take locks, and a dump does both.
// So the handler only writes one byte to a pipe; a helper thread blocked on
// the pipe's other end runs one dump per byte.  Each dump gets the next
// sequence number (%n in the path).  If the program later installs its own
// handler for the same signal, that handler wins and dumps stop: choose a
// signal the program does not use.
//
// fork(): the helper thread is not recreated in a child, and the child's
// copy of the pipe leads to the parent's thread, so the child closes it and
// its signal dumps are off (the signal is still caught, and does nothing):
// a signal to a child never makes the parent dump.  The write end is
// non-blocking, so a handler never waits on a full pipe (a byte already
// pending asks for the same dump); both ends close on exec.

#include "../profile/control.h"
#include "../profile/env_config.h"

#include <cstdlib>
#include <fcntl.h>
#include <pthread.h>

namespace snmalloc::profile
{
  class AutoDump
  {
    EnvConfig config_;
    std::atomic<unsigned long> sequence_{0};
    int pipe_read_ = -1;
    int pipe_write_ = -1;
    pid_t pipe_owner_ = 0; // the process whose helper thread reads the pipe

    static void report(const char* path, DumpResult r)
    {
      static const char prefix[] = "snmalloc: heap profile dump to ";
      (void)!::write(2, prefix, sizeof(prefix) - 1);
      (void)!::write(2, path, std::strlen(path));
      (void)!::write(2, " failed: ", 9);
      (void)!::write(2, r.message(), std::strlen(r.message()));
      (void)!::write(2, "\n", 1);
    }

    static void on_signal(int)
    {
      // A child between fork() and in_fork_child still holds the pipe.
      int fd = instance().pipe_write_;
      if (fd < 0 || ::getpid() != instance().pipe_owner_)
        return;
      int saved = errno;
      char byte = 1;
      (void)!::write(fd, &byte, 1);
      errno = saved;
    }

    static void in_fork_child()
    {
      AutoDump& self = instance();
      if (self.pipe_write_ < 0)
        return;
      int fds[2] = {self.pipe_read_, self.pipe_write_};
      self.pipe_write_ = -1;
      self.pipe_read_ = -1;
      ::close(fds[0]);
      ::close(fds[1]);
    }

    static void* signal_thread(void*)
    {
      char byte;
      for (;;)
      {
        ssize_t n = ::read(instance().pipe_read_, &byte, 1);
        if (n == 1)
          instance().dump_now();
        else if (n < 0 && errno == EINTR)
          continue;
        else
          return nullptr;
      }
    }

    static void at_exit()
    {
      AutoDump& self = instance();
      if (self.config_.dump_at_exit)
        self.dump_now();
      if (self.config_.peak_path[0] != '\0')
        self.dump_peak_now();
    }

    bool start_signal_thread()
    {
      int fds[2];
      if (::pipe2(fds, O_CLOEXEC) != 0 || ::fcntl(fds[1], F_SETFL, O_NONBLOCK) != 0)
        return false;
      pipe_read_ = fds[0];
      pipe_write_ = fds[1];
      pipe_owner_ = ::getpid();
      pthread_t thread;
      pthread_attr_t attr;
      ::pthread_attr_init(&attr);
      ::pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
      bool ok = ::pthread_create(&thread, &attr, signal_thread, nullptr) == 0;
      ::pthread_attr_destroy(&attr);
      if (!ok || ::pthread_atfork(nullptr, nullptr, in_fork_child) != 0)
        return false;
      struct sigaction sa;
      std::memset(&sa, 0, sizeof(sa));
      sa.sa_handler = on_signal;
      sa.sa_flags = SA_RESTART;
      sigemptyset(&sa.sa_mask);
      return ::sigaction(config_.dump_signal, &sa, nullptr) == 0;
    }

  public:
    static AutoDump& instance()
    {
      static AutoDump single;
      return single;
    }

    // Write a profile (`write` is dump or dump_peak) to `pattern` expanded
    // with the next sequence number; a failure is reported on stderr.
    DumpResult dump_numbered(const char* pattern, DumpResult (*write)(const char*))
    {
      char path[PATH_CAPACITY];
      unsigned long seq = sequence_.fetch_add(1);
      if (!expand_dump_path(pattern, seq, path, sizeof(path)))
      {
        report(pattern, {ENAMETOOLONG});
        return {ENAMETOOLONG};
      }
      DumpResult r = write(path);
      if (!r.ok())
        report(path, r);
      return r;
    }

    // Write the next numbered profile to the configured path.
    DumpResult dump_now()
    {
      return dump_numbered(config_.path, [](const char* path) { return dump(path); });
    }

    // Write the peak-heap profile to the configured peak path.
    DumpResult dump_peak_now()
    {
      return dump_numbered(config_.peak_path, [](const char* path) { return dump_peak(path); });
    }

    // Read SNMALLOC_PROFILE and act on it.  Called once at start-up.
    void configure_from_environment()
    {
      const char* text = std::getenv("SNMALLOC_PROFILE");
      if (text == nullptr || !parse_env_config(text, config_))
        return;
      set_max_depth(config_.depth);
      start(config_.rate);
      if (config_.dump_at_exit || config_.peak_path[0] != '\0')
        std::atexit(at_exit);
      if (config_.dump_signal != 0 && !start_signal_thread())
      {
        static const char msg[] =
          "snmalloc: SNMALLOC_PROFILE: could not set up dump_on_signal\n";
        (void)!::write(2, msg, sizeof(msg) - 1);
      }
    }
  };
} // namespace snmalloc::profile
