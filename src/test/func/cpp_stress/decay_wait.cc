// A large allocation while another thread returns the only free memory to
// the OS: the decay takes its blocks off the free lists for the length of
// its madvise calls, and a request that finds no block meanwhile must wait
// for them to come back, not fail with ENOMEM.
//
// The program re-executes itself under RLIMIT_AS, so that the heap can be
// filled.  It holds one block X of 320 MiB, written so that its pages are
// resident, and fills the rest of the arena with blocks it never touches.
// Each round frees X (past the 256 MiB limit of free resident memory, so
// the free returns every free page at once), while another thread waits
// to see X's chunks taken by that decay and then asks for 200 MiB, which
// only X's range can give.  Then X is allocated and written again.
#include "support/child_wait.h"
#include "support/exhaust.h"

#include <snmalloc/snmalloc.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sys/resource.h>
#include <thread>
#include <unistd.h>

namespace
{
  constexpr size_t MiB = size_t(1) << 20;
  constexpr size_t X_BYTES = 320 * MiB;
  constexpr size_t REQUEST_BYTES = 200 * MiB;
  // The heap takes what the limit leaves: 2.5 GiB less a process of a few
  // tens of MiB and the slack.
  constexpr rlim_t LIMIT = rlim_t(2560) * MiB;
  constexpr size_t SLACK_BYTES = 96 * MiB;
  constexpr int ROUNDS = 40;
  constexpr int ROUNDS_IN_FLIGHT_WANTED = 5;

  bool decommitting(const void* p)
  {
    uintptr_t owner = snmalloc::pagemap.entry_of(p).get_owner();
    return snmalloc::is_tag_of(owner, snmalloc::ChunkKind::Decommitting);
  }

  void* held[1 << 16];

  int run()
  {
    void* x = snmalloc::alloc(X_BYTES);
    if (x == nullptr)
    {
      std::fprintf(stderr, "decay_wait: no arena of the size expected\n");
      return 2;
    }
    std::memset(x, 1, X_BYTES);
    // Every block there is, from 512 MiB down to one chunk, never freed;
    // then room for the rounds' threads, less than the request.
    snmalloc_test::AddressSpaceSlack slack(SLACK_BYTES);
    snmalloc_test::exhaust(held, sizeof(held) / sizeof(held[0]), 512 * MiB, size_t(16) << 10,
      [](size_t size) { return snmalloc::alloc(size); });
    if (!slack.held() || snmalloc::alloc(REQUEST_BYTES) != nullptr)
    {
      std::fprintf(stderr, "decay_wait: the arena is not full\n");
      return 2;
    }
    slack.give_back();
    int in_flight = 0;
    int failures = 0;
    for (int round = 0; round < ROUNDS && in_flight < ROUNDS_IN_FLIGHT_WANTED; round++)
    {
      std::atomic<bool> freed{false};
      bool seen = false;
      void* got = nullptr;
      std::thread requester([&] {
        while (!freed.load(std::memory_order_acquire) && !(seen = decommitting(x)))
        {
        }
        got = snmalloc::alloc(REQUEST_BYTES);
      });
      snmalloc::dealloc(x);
      freed.store(true, std::memory_order_release);
      requester.join();
      in_flight += seen;
      if (got == nullptr)
      {
        std::fprintf(stderr, "decay_wait: round %d: 200 MiB refused (decay %s)\n", round,
          seen ? "seen in flight" : "not seen");
        failures++;
        break;
      }
      snmalloc::dealloc(got);
      x = snmalloc::alloc(X_BYTES);
      if (x == nullptr)
      {
        std::fprintf(stderr, "decay_wait: round %d: X not allocated again\n", round);
        return 2;
      }
      std::memset(x, 1, X_BYTES);
    }
    std::printf("decay_wait: %d failures, a decay seen in flight in %d rounds\n", failures, in_flight);
    if (in_flight == 0)
      return 3; // the case this test is for never came up
    return failures == 0 ? 0 : 1;
  }
}

int main(int argc, char** argv)
{
  if (argc == 2 && std::strcmp(argv[1], "--limited") == 0)
    return run();
  pid_t child = fork();
  if (child == 0)
  {
    rlimit limit{LIMIT, LIMIT};
    if (setrlimit(RLIMIT_AS, &limit) != 0)
      _exit(4);
    execl("/proc/self/exe", argv[0], "--limited", static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = snmalloc_test::wait_with_limit(child, std::chrono::seconds(240));
  if (status == -1)
    std::fprintf(stderr, "decay_wait: hung\n");
  return snmalloc_test::exited_cleanly(status) ? 0 : 1;
}
