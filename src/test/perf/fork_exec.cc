// Start-up cost: a parent that forks and execs short children, one after
// the other, like a shell script or a build system.  Each child is this
// program again (with --child): it allocates and frees a few hundred
// blocks, checks them, and exits.  Whatever the allocator (or its
// profiler) does when a process starts is paid once per child, so this
// measures start-up, not allocation.  One operation = one child, from fork
// to its exit status.
#include "block_stamp.h"
#include "fast_random.h"
#include "harness.h"

#include <cstdlib>
#include <cstring>
#include <sys/wait.h>
#include <unistd.h>

namespace
{
  constexpr size_t child_blocks = 256;

  int child()
  {
    bench::FastRandom random(2);
    void* blocks[child_blocks];
    size_t sizes[child_blocks];
    for (size_t i = 0; i < child_blocks; i++)
    {
      sizes[i] = random.between(16, 4096);
      blocks[i] = std::malloc(sizes[i]);
      if (blocks[i] == nullptr)
        bench::fail("fork-exec child: malloc(%zu) returned null", sizes[i]);
      bench::stamp_block(blocks[i], sizes[i]);
    }
    for (size_t i = 0; i < child_blocks; i++)
    {
      bench::verify_block(blocks[i], sizes[i], "fork-exec child");
      std::free(blocks[i]);
    }
    return 0;
  }

  void run_child(const char* self)
  {
    pid_t pid = fork();
    if (pid < 0)
      bench::fail("fork-exec: fork failed");
    if (pid == 0)
    {
      execl(self, self, "--child", static_cast<char*>(nullptr));
      _exit(127);
    }
    int status = 0;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
      bench::fail("fork-exec: child failed (wait status %d)", status);
  }
} // namespace

int main(int argc, char** argv)
{
  if (argc == 2 && std::strcmp(argv[1], "--child") == 0)
    return child();
  bench::Options options = bench::parse_options(argc, argv, 1'000, 20);
  bench::Stopwatch stopwatch;
  double children_before = bench::process_cpu_seconds(RUSAGE_CHILDREN);
  for (uint64_t i = 0; i < options.ops; i++)
    run_child("/proc/self/exe");
  bench::Elapsed elapsed = stopwatch.elapsed();
  // The work is the children's: count their CPU time too.
  elapsed.cpu_seconds += bench::process_cpu_seconds(RUSAGE_CHILDREN) - children_before;
  bench::report("fork-exec", 1, options.ops, elapsed);
  return 0;
}
