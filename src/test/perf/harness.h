// The benchmark harness shared by every program in this folder: command
// line, wall and CPU timing, failure reporting and the one machine-readable
// result line that scripts/bench/bench.py reads.
//
// The programs use plain malloc/free/realloc/new and never link the
// allocator under test; each allocator is substituted with LD_PRELOAD.
#pragma once

#include <chrono>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sys/resource.h>
#include <thread>
#include <vector>

namespace bench
{
  struct Options
  {
    // Work per run; what one operation is depends on the workload.
    uint64_t ops;
    // Worker threads of the multi-threaded workloads.
    unsigned threads;
  };

  // Prints the message and aborts: a wrong block is an allocator bug, and
  // the core dump is the most useful thing to leave behind.
  [[noreturn]] inline void fail(const char* format, ...)
  {
    va_list args;
    va_start(args, format);
    std::fputs("FAIL: ", stderr);
    std::vfprintf(stderr, format, args);
    std::fputc('\n', stderr);
    va_end(args);
    std::abort();
  }

  inline uint64_t parse_count(const char* flag, const char* text)
  {
    char* end = nullptr;
    unsigned long long value = std::strtoull(text, &end, 10);
    if (end == text || *end != '\0' || value == 0)
      fail("%s needs a positive integer, got '%s'", flag, text);
    return value;
  }

  // Accepts --smoke (the tiny size ctest runs), --ops N and --threads N.
  inline Options
  parse_options(int argc, char** argv, uint64_t default_ops, uint64_t smoke_ops)
  {
    Options options{default_ops, 2};
    for (int i = 1; i < argc; i++)
    {
      bool has_value = i + 1 < argc;
      if (std::strcmp(argv[i], "--smoke") == 0)
        options.ops = smoke_ops;
      else if (std::strcmp(argv[i], "--ops") == 0 && has_value)
        options.ops = parse_count("--ops", argv[++i]);
      else if (std::strcmp(argv[i], "--threads") == 0 && has_value)
        options.threads = static_cast<unsigned>(parse_count("--threads", argv[++i]));
      else
        fail("usage: %s [--smoke] [--ops N] [--threads N]", argv[0]);
    }
    return options;
  }

  struct Elapsed
  {
    double wall_seconds;
    // User + system time of all threads: on a machine shared with other
    // jobs it varies much less than wall time, as waiting for a CPU is not
    // counted.
    double cpu_seconds;
  };

  // RUSAGE_SELF: this process; RUSAGE_CHILDREN: its children that have
  // been waited for.
  inline double process_cpu_seconds(int who = RUSAGE_SELF)
  {
    rusage usage{};
    getrusage(who, &usage);
    auto seconds = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec / 1e6; };
    return seconds(usage.ru_utime) + seconds(usage.ru_stime);
  }

  class Stopwatch
  {
    std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
    double start_cpu_ = process_cpu_seconds();

  public:
    Elapsed elapsed() const
    {
      std::chrono::duration<double> wall = std::chrono::steady_clock::now() - start_;
      return Elapsed{wall.count(), process_cpu_seconds() - start_cpu_};
    }
  };

  // Runs work(i) for i = 0..threads-1, each on its own thread, and times
  // them from the first start to the last join.
  template<typename Work>
  Elapsed run_threads(unsigned threads, Work work)
  {
    Stopwatch stopwatch;
    std::vector<std::thread> running;
    for (unsigned i = 0; i < threads; i++)
      running.emplace_back(work, i);
    for (std::thread& thread : running)
      thread.join();
    return stopwatch.elapsed();
  }

  // `threads` is the number of threads that allocate or free.
  inline void report(const char* name, unsigned threads, uint64_t ops, const Elapsed& elapsed)
  {
    double count = static_cast<double>(ops);
    std::printf(
      "RESULT name=%s ops=%llu seconds=%.6f ops_per_sec=%.1f cpu_seconds=%.6f "
      "ops_per_cpu_sec=%.1f threads=%u\n",
      name,
      static_cast<unsigned long long>(ops),
      elapsed.wall_seconds,
      count / elapsed.wall_seconds,
      elapsed.cpu_seconds,
      count / elapsed.cpu_seconds,
      threads);
  }
} // namespace bench
