// Shared by the heap-profiling tests: turning profiling on for a scope,
// replacing the stack source, and reading dumped profiles back with the
// real client, `go tool pprof`.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <map>
#include <snmalloc/snmalloc.h>
#include <string>
#include <thread>
#include <vector>

namespace profile_test
{
  // Profiling at mean interval R for the life of the object; stopped after,
  // even when an assertion fails half way.
  class ProfilingAt
  {
  public:
    explicit ProfilingAt(size_t interval);
    // In `mode`, at `rate` bytes or allocations.
    ProfilingAt(snmalloc::profile::SampleMode mode, size_t rate);
    ~ProfilingAt();
    ProfilingAt(const ProfilingAt&) = delete;
    ProfilingAt& operator=(const ProfilingAt&) = delete;
  };

  // A frame for a replaced stack source that pprof names as `function`:
  // the profile records each return address - 1, which must fall inside it.
  template<typename F>
  uintptr_t frame_in(F* function)
  {
    return reinterpret_cast<uintptr_t>(function) + 1;
  }

  // Objects a test holds, chained through their first word, so holding
  // millions costs no memory beyond them.
  struct Node
  {
    Node* next;
  };

  // `n` objects of `size` bytes, allocated by the caller's frame (inlined
  // into it, so that the profile names the caller's site).
  __attribute__((always_inline)) inline Node* allocate_chain(size_t size, size_t n)
  {
    Node* head = nullptr;
    for (size_t i = 0; i < n; i++)
    {
      auto* node = static_cast<Node*>(std::malloc(size));
      node->next = head;
      head = node;
    }
    return head;
  }

  inline void free_chain(Node* head)
  {
    while (head != nullptr)
    {
      Node* next = head->next;
      std::free(head);
      head = next;
    }
  }

  // A replaced stack source for the life of the object; the unwind tables after.
  class StackSourceScope
  {
  public:
    explicit StackSourceScope(snmalloc::profile::StackSource source);
    ~StackSourceScope();
    StackSourceScope(const StackSourceScope&) = delete;
    StackSourceScope& operator=(const StackSourceScope&) = delete;
  };

  // malloc_usable_size of an object of `size` bytes (from aligned_alloc
  // when `alignment` is given) while profiling is off: the size a sampled
  // object must report, and the unit of the profile's byte values.
  size_t usable_size_unsampled(size_t size, size_t alignment = 0);

  // Runs f on a new thread and waits for it.  A new thread starts with empty
  // free lists, so its first allocation of every size reaches the refill
  // where the sampler picks up the interval start() set: at R == 1 every
  // allocation it makes is sampled.  (A thread that allocated before start()
  // may still hold objects on its free lists, handed out unsampled.)
  template<typename F>
  void on_fresh_thread(F&& f)
  {
    std::thread(std::forward<F>(f)).join();
  }

  // Path of this test executable: pprof reads its symbols and build ID.
  std::string self_exe();

  // A fresh directory under /tmp, removed with its contents at scope end
  // (kept, and its path printed, when PROFILE_TEST_KEEP is set).
  class TempDir
  {
    std::string path_;

  public:
    TempDir();
    ~TempDir();
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;

    const std::string& path() const
    {
      return path_;
    }

    std::string file(const std::string& name) const
    {
      return path_ + "/" + name;
    }

    // Names in the directory, sorted, without "." and "..".
    std::vector<std::string> entries() const;
  };

  bool file_exists(const std::string& path);

  // Dumps the profile to `path`, failing the test if the dump fails.
  void dump_or_fail(const std::string& path);

  struct CommandResult
  {
    int exit_status;
    std::string output;
    std::string errors;
  };

  // Runs `go tool pprof <arguments>` with stdout captured.  Fails the test
  // when go is missing: these tests must not pass without the real reader.
  CommandResult pprof(const std::string& arguments);

  // pprof run that must succeed; returns its stdout.
  std::string pprof_ok(const std::string& arguments);

  // A function's name as pprof prints it, without the parameter list and
  // the " const" and " [clone .x]" suffixes: "f(int) const" -> "f".
  // (pprof shows names with or without parameters depending on where it
  // found them.)  GCC's split-off parts keep their own names: "f.cold".
  std::string base_name(std::string name);

  // One allocating function's flat values in the four sample types, as
  // `go tool pprof -top` shows them: the samples whose innermost frame,
  // once the profile's drop_frames has cut the allocator's own frames, is
  // that function.
  struct SiteValues
  {
    int64_t alloc_objects = 0;
    int64_t alloc_space = 0;
    int64_t inuse_objects = 0;
    int64_t inuse_space = 0;
  };

  class SiteTable
  {
    std::map<std::string, SiteValues> by_function_;

  public:
    // Reads `profile` (written by this executable) with pprof -top, once
    // per sample type, with further pprof `options` if given.
    explicit SiteTable(const std::string& profile, const std::string& options = "");

    // All zeros for a function pprof does not list.
    SiteValues operator[](const std::string& function) const;

    bool contains(const std::string& function) const
    {
      return by_function_.count(function) != 0;
    }
  };

  // pprof -raw: the profile as stored, before pprof prunes any frame.
  // Function names are base names.
  struct RawSample
  {
    std::vector<int64_t> values; // in the order of RawProfile::sample_types
    std::vector<std::string> functions; // innermost first
    std::vector<int64_t> bytes_labels;
  };

  struct RawProfile
  {
    std::string period_type;
    int64_t period = -1;
    std::string sample_types; // the header line, e.g. "alloc_objects/count ..."
    std::vector<RawSample> samples;
  };

  RawProfile read_raw(const std::string& profile);

  // pprof -traces: per sample, the value of `sample_index` as printed and the
  // stack after drop_frames, innermost first, as base names.
  struct Trace
  {
    std::string value;
    std::vector<std::string> functions;
  };

  std::vector<Trace> read_traces(const std::string& profile, const std::string& sample_index);
} // namespace profile_test
