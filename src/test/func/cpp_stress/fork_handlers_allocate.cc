// fork() handlers that allocate, in a program that uses snmalloc as a
// library (its malloc stays glibc's), registered before the allocator's
// own: a constructor of higher priority runs before the load-time setup
// that registers those, as a library's constructor would.  fork() then
// runs these prepare handlers after the allocator's has taken its locks,
// and these parent and child handlers before the allocator's give them
// back: their allocations must pass on the forking thread, while two
// other threads allocate and wait.  (The shims register theirs first and
// meet no such handler: func-preload-atfork-allocates.)
#include "support/child_wait.h"

#include <snmalloc/snmalloc.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <pthread.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace
{
  constexpr int FORKS = 24;
  constexpr auto CHILD_LIMIT = std::chrono::seconds(30);
  std::atomic<int> prepared{0}, in_parent{0}, in_child{0};
  std::atomic<bool> stop{false};

  // Small, large and zeroed blocks, one grown, all freed, sized by
  // `round`; whether their contents were as written.
  bool allocate_and_free(unsigned round)
  {
    size_t small = 24 + (round * 40) % 4000;
    size_t large = (size_t(1) << 20) + (size_t(round % 8) << 20);
    auto* a = static_cast<unsigned char*>(snmalloc::alloc(small));
    auto* b = static_cast<unsigned char*>(snmalloc::alloc(large));
    auto* c = static_cast<unsigned char*>(snmalloc::alloc_zeroed(large / 2));
    if (a == nullptr || b == nullptr || c == nullptr)
      return false;
    std::memset(a, 0x5a, small);
    std::memset(b, 0xa5, large);
    bool zeroed = c[0] == 0 && c[large / 2 - 1] == 0;
    auto* grown = static_cast<unsigned char*>(snmalloc::reallocate(a, small * 64));
    if (grown == nullptr)
      return false;
    bool kept = grown[0] == 0x5a && grown[small - 1] == 0x5a;
    snmalloc::dealloc(grown);
    snmalloc::dealloc(b);
    snmalloc::dealloc(c);
    return zeroed && kept;
  }

  void prepare()
  {
    if (allocate_and_free(unsigned(prepared.load())))
      prepared++;
  }

  void parent()
  {
    if (allocate_and_free(unsigned(in_parent.load()) + 3))
      in_parent++;
  }

  void child()
  {
    if (allocate_and_free(unsigned(in_child.load()) + 5))
      in_child++;
  }

  __attribute__((constructor(101))) void register_before_the_allocator()
  {
    if (::pthread_atfork(prepare, parent, child) != 0)
      std::abort();
  }
} // namespace

int main()
{
  ::alarm(120); // a fork that hangs: SIGALRM names it before ctest's timeout
  std::vector<std::thread> workers;
  for (unsigned t = 0; t < 2; t++)
    workers.emplace_back([t] {
      for (unsigned round = t * 7; !stop.load(std::memory_order_relaxed); round++)
        allocate_and_free(round);
    });
  int failures = 0;
  for (int f = 0; f < FORKS; f++)
  {
    pid_t pid = ::fork();
    if (pid < 0)
      return 3;
    if (pid == 0)
      ::_exit(in_child.load() == 1 && allocate_and_free(11) ? 0 : 1);
    if (!snmalloc_test::exited_cleanly(snmalloc_test::wait_with_limit(pid, CHILD_LIMIT)))
    {
      std::fprintf(stderr, "fork %d: the child failed or hung\n", f);
      failures++;
    }
  }
  stop = true;
  for (auto& w : workers)
    w.join();
  std::printf(
    "%d forks, prepare handler allocated in %d, parent handler in %d, %d children failed\n",
    FORKS,
    prepared.load(),
    in_parent.load(),
    failures);
  return failures == 0 && prepared.load() == FORKS && in_parent.load() == FORKS ? 0 : 1;
}
