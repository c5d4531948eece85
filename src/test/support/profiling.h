// Driving the profiler in heap-profiling tests: profiling on for a scope,
// a replaced stack source, objects allocated at the caller's site, threads
// that start with empty free lists, and dumps that must succeed.  Reading
// the profiles back is support/pprof_output.h's job.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <snmalloc/snmalloc.h>
#include <string>
#include <thread>
#include <vector>

namespace snmalloc_test
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

  // Dumps the profile to `path`, failing the test if the dump fails.
  void dump_or_fail(const std::string& path);

  // Word `i` (from 0) of the setting of a test built once and run at
  // several (a sampling interval, a mode): PROFILE_TEST_SETTING, words
  // separated by spaces, in the environment each run has from ctest
  // (snmalloc_test_at).  Unset, when the test cases are only listed, it
  // is empty (0), and require_test_setting fails a test case run so; a
  // word missing from a setting, or not a positive number for
  // test_setting_number, ends the process saying why.
  std::string test_setting(size_t i);
  size_t test_setting_number(size_t i);
  void require_test_setting();
} // namespace snmalloc_test
