#pragma once
// Layer profile/guard: the SIGSEGV handler of guarded sampling.
//
// Installed (sigaction, SA_SIGINFO | SA_ONSTACK: on the thread's alternate
// signal stack if it has one) when guarding is first enabled; the handler
// found installed then is kept and chained to.  On a fault:
//   - at an address of a guarded slot: one report on stderr
//     (guard_report.h), the faulting access's stack first, then the default action is restored and the
//     handler returns, so the faulting instruction runs again and the
//     process dies of that SIGSEGV as it would have without us, core dump
//     and all;
//   - anywhere else: the previous handler, untouched: called with the same
//     arguments if it was a handler, or restored and the fault re-run if
//     it was SIG_DFL or SIG_IGN (the kernel kills for an ignored fault).
// A program that installs its own SIGSEGV handler after guarding started
// replaces this one: its guarded faults then reach only its handler.

#include "../stacks/stack_capture.h"
#include "guard_report.h"

#include <csignal>

namespace snmalloc::profile
{
  class GuardSignal
  {
    static inline struct sigaction previous_;
    static inline std::atomic<bool> installed_{false};
    static inline SpinLock install_lock_;

    static const char* access_of(const void* context)
    {
      int write = Pal::fault_is_write(context);
      return write < 0 ? "" : write != 0 ? "write" : "read";
    }

    static constexpr size_t MAX_FAULT_DEPTH = 64;

    // The stack of the faulting access, from its instruction outwards: the
    // walk from here (through this handler and the signal frame, which the
    // library walkers follow) cut where it reaches the interrupted
    // instruction.  That one is kept as if it were a return address after
    // it, so that the report's lookup of the byte before a return address
    // names its own function.  Where the instruction is unknown or not
    // found, the whole walk (the report drops the allocator's frames at
    // its top).
    static size_t faulting_stack(const void* context, uintptr_t (&frames)[MAX_FAULT_DEPTH])
    {
      size_t n = walk_current_stack(frames, MAX_FAULT_DEPTH);
      uintptr_t at = Pal::interrupted_instruction(context);
      for (size_t i = 0; at != 0 && i < n; i++)
      {
        if (frames[i] != at)
          continue;
        frames[0] = at + 1;
        for (size_t j = 1; i + j < n; j++)
          frames[j] = frames[i + j];
        return n - i;
      }
      return n;
    }

    static void restore(const struct sigaction& action)
    {
      ::sigaction(SIGSEGV, &action, nullptr);
    }

    static void on_fault(int sig, siginfo_t* info, void* context)
    {
      int saved = errno;
      GuardDiagnosis d;
      if (diagnose_fault(reinterpret_cast<uintptr_t>(info->si_addr), d))
      {
        uintptr_t frames[MAX_FAULT_DEPTH];
        size_t depth = faulting_stack(context, frames);
        write_guard_report(d, access_of(context), frames, depth);
        struct sigaction dfl;
        std::memset(&dfl, 0, sizeof(dfl));
        dfl.sa_handler = SIG_DFL;
        sigemptyset(&dfl.sa_mask);
        restore(dfl);
        errno = saved;
        return; // the access faults again, now fatally
      }
      if ((previous_.sa_flags & SA_SIGINFO) != 0)
        previous_.sa_sigaction(sig, info, context);
      else if (previous_.sa_handler == SIG_DFL || previous_.sa_handler == SIG_IGN)
        restore(previous_);
      else
        previous_.sa_handler(sig);
      errno = saved;
    }

  public:
    // Once per process; false if sigaction failed.
    static bool install()
    {
      if (installed_.load(std::memory_order_acquire))
        return true;
      LockGuard g(install_lock_);
      if (installed_.load(std::memory_order_relaxed))
        return true;
      struct sigaction sa;
      std::memset(&sa, 0, sizeof(sa));
      sa.sa_sigaction = on_fault;
      sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
      sigemptyset(&sa.sa_mask);
      if (::sigaction(SIGSEGV, &sa, &previous_) != 0)
        return false;
      installed_.store(true, std::memory_order_release);
      return true;
    }
  };
} // namespace snmalloc::profile
