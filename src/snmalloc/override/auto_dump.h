#pragma once
// Layer override: dumps nobody asked for in code: at exit, on a signal, and
// automatically (every N allocated bytes, every N seconds, on N bytes of
// growth of the live heap), as configured by SNMALLOC_PROFILE in the
// environment (env_config.h) or by configure() with the same text.
//
// Every dump but the exit ones runs on one helper thread, blocked in poll()
// on a pipe (and a timeout for dump_period): a signal handler must not
// allocate or take locks, and an allocating thread must not dump inside
// malloc.  So the signal handler writes one byte to the pipe (one dump per
// byte), and a thread whose sample crosses a dump_every or dump_on_growth
// threshold writes another kind (profile/samples/dump_triggers.h), one dump each
// too.  Each dump gets the next sequence number (%n in
// the path); keep=N removes automatic dumps beyond the newest N (dumps on a
// signal and at exit are asked for, and kept).  If the program later
// installs its own handler for the same signal, that handler wins and
// signal dumps stop: choose a signal the program does not use.
//
// fork(): the helper thread is not recreated in a child, and the child's
// copy of the pipe leads to the parent's thread, so the child closes it:
// its signal and automatic dumps are off (the signal is still caught, and
// does nothing), and a signal to a child never makes the parent dump.  The
// write end is non-blocking, so a writer never waits on a full pipe (a byte
// already pending asks for the same dump); both ends close on exec.
//
// Exit dumps and the leak report (leak_report=1, on stderr) run from an
// atexit handler registered when the library starts (before main, whatever
// the environment says), so they run after the program's own atexit
// handlers and static destructors, also when configure() asks for them
// later.  A program that never starts the library that way (the header-only
// C++ API) registers it at its first configure().
//
// The signal handler replaces the program's own for that signal; a
// reconfiguration that names another signal, or none, gives the old signal
// its previous action back.

#include "../profile/profile.h"
#include "../profile/config/env_config.h"
#include "http_endpoint.h"

#include <cstdlib>
#include <cxxabi.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>

// This object's handle, for __cxa_atexit (the compiler's start files define it).
extern "C" __attribute__((visibility("hidden"))) void* __dso_handle;

namespace snmalloc::profile
{
  class AutoDump
  {
    static constexpr char SIGNAL_BYTE = 1;
    static constexpr char RECONFIGURE_BYTE = 0;
    static_assert(DumpTriggers::WAKE_BYTE != SIGNAL_BYTE && DumpTriggers::WAKE_BYTE != RECONFIGURE_BYTE);

    // Guards config_, the kept ring and the set-up flags; never held while
    // dumping.
    // (The object is built by the compiler, and the members' order keeps
    // what start-up writes on one page.)
    SpinLock lock_;
    std::atomic<unsigned long> sequence_{0};
    std::atomic<int64_t> period_ns_{0};
    int pipe_read_ = -1;
    int pipe_write_ = -1;
    pid_t pipe_owner_ = 0; // the process whose helper thread reads the pipe
    bool at_exit_registered_ = false;
    int signal_installed_ = 0;
    // Sequence numbers of the automatic dumps kept, oldest first: a ring of
    // kept_count_ from kept_first_ (the ring last, so that its 8 KiB are
    // not touched before it is used).
    size_t kept_first_ = 0;
    size_t kept_count_ = 0;
    struct sigaction signal_previous_ = {}; // signal_installed_'s action before ours
    EnvConfig config_;
    unsigned long kept_[MAX_KEEP] = {};

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
      char byte = SIGNAL_BYTE;
      (void)!::write(fd, &byte, 1);
      errno = saved;
    }

    static void before_fork()
    {
      instance().lock_.hold_for_fork();
    }

    static void after_fork_in_parent()
    {
      instance().lock_.release_after_fork();
    }

    static void in_fork_child()
    {
      AutoDump& self = instance();
      dump_triggers.forget_helper();
      if (self.pipe_write_ >= 0)
      {
        ::close(self.pipe_read_);
        ::close(self.pipe_write_);
        self.pipe_write_ = -1;
        self.pipe_read_ = -1;
      }
      self.lock_.release_after_fork();
    }

    // Milliseconds for poll() until `deadline` (monotonic ns).
    static int timeout_ms(int64_t deadline)
    {
      int64_t left = deadline - Pal::monotonic_ns();
      if (left <= 0)
        return 0;
      int64_t ms = (left + 999999) / 1000000;
      return ms > (1 << 30) ? (1 << 30) : int(ms);
    }

    static void* helper_thread(void*)
    {
      AutoDump& self = instance();
      int64_t deadline = 0;
      for (;;)
      {
        int64_t period = self.period_ns_.load(std::memory_order_relaxed);
        if (period == 0)
          deadline = 0;
        else if (deadline == 0 || deadline - Pal::monotonic_ns() > period)
          deadline = Pal::monotonic_ns() + period;
        pollfd p{self.pipe_read_, POLLIN, 0};
        int n = ::poll(&p, 1, period != 0 ? timeout_ms(deadline) : -1);
        if (n < 0 && errno == EINTR)
          continue;
        if (n < 0)
          return nullptr;
        if (n == 0)
        {
          deadline += period;
          self.dump_automatic();
          continue;
        }
        char bytes[64];
        ssize_t got = ::read(self.pipe_read_, bytes, sizeof(bytes));
        if (got < 0 && errno == EINTR)
          continue;
        if (got <= 0)
          return nullptr;
        for (ssize_t i = 0; i < got; i++)
        {
          if (bytes[i] == SIGNAL_BYTE)
            self.dump_now();
          else if (bytes[i] == DumpTriggers::WAKE_BYTE)
            self.dump_automatic();
        }
      }
    }

    // Reads four flags, not a copy of the configuration: a process that
    // asked for nothing at exit should not pay for 8 KiB of stack.
    SNMALLOC_ONCE_PATH static void at_exit()
    {
      AutoDump& self = instance();
      bool dump_at_exit, dump_peak_at_exit, dump_footprint_at_exit, leak_report;
      {
        LockGuard g(self.lock_);
        dump_at_exit = self.config_.dump_at_exit;
        dump_peak_at_exit = !self.config_.peak_path.empty();
        dump_footprint_at_exit = !self.config_.footprint_path.empty();
        leak_report = self.config_.leak_report;
      }
      if (dump_at_exit)
        self.dump_now();
      if (dump_peak_at_exit)
        self.dump_peak_now();
      if (dump_footprint_at_exit)
        self.dump_footprint_now();
      if (leak_report)
        write_leak_report(2);
    }

    // Held while configure() starts the HTTP endpoint: taken before the
    // server's lock.
    static constexpr ForkLock fork_lock{
      http::Server::FORK_ORDER - 1, before_fork, after_fork_in_parent, in_fork_child};

    // `registered`: the fork handlers are (apply), which our own second
    // thread needs, not relying on pthread_create allocating.
    bool start_helper_locked(bool registered)
    {
      if (pipe_write_ >= 0)
        return true;
      if (!registered)
        return false;
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
      bool ok = ::pthread_create(&thread, &attr, helper_thread, nullptr) == 0;
      ::pthread_attr_destroy(&attr);
      return ok;
    }

    // Catch `signal` (0: none) for dumps, giving the signal caught so far
    // back its previous action.
    bool install_signal_locked(int signal)
    {
      if (signal == signal_installed_)
        return true;
      if (signal_installed_ != 0)
      {
        ::sigaction(signal_installed_, &signal_previous_, nullptr);
        signal_installed_ = 0;
      }
      if (signal == 0)
        return true;
      struct sigaction sa;
      std::memset(&sa, 0, sizeof(sa));
      sa.sa_handler = on_signal;
      sa.sa_flags = SA_RESTART;
      sigemptyset(&sa.sa_mask);
      if (::sigaction(signal, &sa, &signal_previous_) != 0)
        return false;
      signal_installed_ = signal;
      return true;
    }

    // __cxa_atexit as atexit() in a shared object calls it, not through
    // libc_nonshared's atexit, whose page of text would be one more fault.
    SNMALLOC_ONCE_PATH void register_at_exit_locked()
    {
      if (!at_exit_registered_)
        at_exit_registered_ = abi::__cxa_atexit([](void*) { at_exit(); }, nullptr, &__dso_handle) == 0;
    }

    EnvConfig config()
    {
      LockGuard g(lock_);
      return config_;
    }

    // Write a profile (`write` is dump or dump_peak) to `pattern` expanded
    // with the next sequence number; a failure is reported on stderr.
    // Returns the sequence number used.
    unsigned long dump_numbered(const char* pattern, DumpResult (*write)(const char*))
    {
      char path[PATH_CAPACITY];
      unsigned long seq = sequence_.fetch_add(1);
      if (!expand_dump_path(pattern, seq, path, sizeof(path)))
      {
        report(pattern, {ENAMETOOLONG});
        return seq;
      }
      DumpResult r = write(path);
      if (!r.ok())
        report(path, r);
      return seq;
    }

    // A dump of the helper's own accord; beyond `keep` of them, the oldest
    // file goes (unless it is the file just written: a path without %n).
    void dump_automatic()
    {
      EnvConfig c = config();
      unsigned long seq = dump_numbered(c.path.c_str(), [](const char* path) { return dump(path); });
      if (c.keep == 0)
        return;
      unsigned long oldest = 0;
      {
        LockGuard g(lock_);
        kept_[(kept_first_ + kept_count_) % MAX_KEEP] = seq;
        if (++kept_count_ <= c.keep)
          return;
        oldest = kept_[kept_first_];
        kept_first_ = (kept_first_ + 1) % MAX_KEEP;
        kept_count_--;
      }
      char old_path[PATH_CAPACITY], new_path[PATH_CAPACITY];
      if (
        expand_dump_path(c.path.c_str(), oldest, old_path, sizeof(old_path)) &&
        expand_dump_path(c.path.c_str(), seq, new_path, sizeof(new_path)) &&
        std::strcmp(old_path, new_path) != 0)
        ::unlink(old_path);
    }

  public:
    static AutoDump& instance()
    {
      SNMALLOC_CONSTINIT static AutoDump single;
      return single;
    }

    // Write the next numbered profile to the configured path.
    void dump_now()
    {
      EnvConfig c = config();
      dump_numbered(c.path.c_str(), [](const char* path) { return dump(path); });
    }

    // Write the peak-heap profile to peak_path.
    void dump_peak_now()
    {
      EnvConfig c = config();
      dump_numbered(c.peak_path.c_str(), [](const char* path) { return dump_peak(path); });
    }

    // Write the footprint profile to footprint_path.
    void dump_footprint_now()
    {
      EnvConfig c = config();
      dump_numbered(c.footprint_path.c_str(), [](const char* path) { return dump_footprint(path); });
    }

    // Start profiling as `c` says, and the dumps it asks for.  false (after
    // one line on stderr) if the helper thread or the signal handler could
    // not be set up.
    SNMALLOC_ONCE_PATH bool apply(const EnvConfig& c)
    {
      bool helper =
        c.dump_signal != 0 || c.dump_every != 0 || c.dump_period_seconds != 0 || c.dump_on_growth != 0;
      // Before lock_, which a fork takes: see add_deferred.
      bool registered = true;
      if (helper)
        registered = fork_locks.add(fork_lock);
      else
        fork_locks.add_deferred(fork_lock);
      LockGuard g(lock_);
      config_ = c;
      kept_count_ = 0;
      kept_first_ = 0;
      set_max_depth(c.depth);
      start(c.mode, c.rate != 0 ? c.rate : default_rate(c.mode));
      bool guard_asked = c.guard != 0 || guard_limit() != 0;
      if (guard_asked && set_guard(c.guard, c.guard_per_second) != 0)
      {
        static const char msg[] =
          "snmalloc: SNMALLOC_PROFILE: could not set up guarded sampling\n";
        (void)!::write(2, msg, sizeof(msg) - 1);
      }
      if (c.dump_at_exit || !c.peak_path.empty() || !c.footprint_path.empty() || c.leak_report)
        register_at_exit_locked();
      if ((helper && !start_helper_locked(registered)) || !install_signal_locked(c.dump_signal))
      {
        static const char msg[] =
          "snmalloc: SNMALLOC_PROFILE: could not start the dump helper thread or signal handler\n";
        (void)!::write(2, msg, sizeof(msg) - 1);
        return false;
      }
      period_ns_.store(int64_t(c.dump_period_seconds) * 1000000000, std::memory_order_relaxed);
      dump_triggers.configure(helper ? pipe_write_ : -1, int64_t(c.dump_every), int64_t(c.dump_on_growth));
      if (pipe_write_ >= 0)
      {
        char byte = RECONFIGURE_BYTE; // the helper re-reads the period
        (void)!::write(pipe_write_, &byte, 1);
      }
      return true;
    }

    // Read SNMALLOC_PROFILE and act on it.  Called once at start-up, where
    // the exit handler is registered whatever the environment asks, so
    // that a later configure() finds it in its place among the program's.
    // Before main no other thread can see config_, so the text is parsed
    // straight into it (and apply's copy of it onto itself writes nothing):
    // not onto the stack, whose 8 KiB a short process would fault in, nor
    // into a second static copy, one more page written.  Wrong text leaves
    // the defaults.
    SNMALLOC_ONCE_PATH void configure_from_environment()
    {
      const char* text = std::getenv("SNMALLOC_PROFILE");
      {
        LockGuard g(lock_);
        register_at_exit_locked();
        if (text == nullptr)
          return;
        if (!parse_env_config(text, config_))
        {
          config_ = EnvConfig();
          return;
        }
      }
      if (apply(config_))
        http_start_configured(config_);
    }
  };

  // Configure profiling and its dumps at run time with the text
  // SNMALLOC_PROFILE takes ("rate=1m,dump_every=1g,keep=5").  EINVAL for
  // bad text (with one line on stderr; nothing changes), EAGAIN when the
  // helper thread could not be started, or the errno of starting the HTTP
  // endpoint http= asks for (EADDRINUSE, ...; said on stderr too).
  inline int configure(const char* text)
  {
    EnvConfig c;
    if (text == nullptr || !parse_env_config(text, c))
      return EINVAL;
    if (!AutoDump::instance().apply(c))
      return EAGAIN;
    return http_start_configured(c);
  }
} // namespace snmalloc::profile
