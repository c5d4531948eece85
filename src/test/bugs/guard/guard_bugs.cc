// One heap bug per run, chosen by argv[1], for guard_suite.sh to run under
// SNMALLOC_PROFILE=...,guard=N and judge by what it prints and how it dies.
// The allocating and freeing functions are the program's own, noinline, so
// the report's stacks must name them.  A bug the guard did not catch (the
// object was placed on the other side of its slot) lets the program print
// "survived" and exit 0.
#include <csetjmp>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <snmalloc/snmalloc_profile.h>
#include <sys/mman.h>
#include <unistd.h>

namespace
{
  constexpr size_t SIZE = 64; // a sizeclass size: usable size == request

  void survived()
  {
    static const char text[] = "survived\n";
    (void)!::write(1, text, sizeof(text) - 1);
    std::exit(0);
  }
} // namespace

// The faulting accesses, in functions of their own that the report's
// faulting stack must start in; volatile, so the compiler does not see
// through them.
__attribute__((noinline)) void guard_bug_write_byte(char* p)
{
  *static_cast<volatile char*>(p) = 1;
  asm volatile("" : : : "memory");
}

__attribute__((noinline)) char guard_bug_read_byte(const char* p)
{
  char c = *static_cast<const volatile char*>(p);
  asm volatile("" : : : "memory");
  return c;
}

__attribute__((noinline)) char* guard_bug_allocate(size_t size)
{
  auto* p = static_cast<char*>(std::malloc(size));
  asm volatile("" : : "r"(p) : "memory");
  return p;
}

__attribute__((noinline)) void guard_bug_release(char* p)
{
  std::free(p);
  asm volatile("" : : : "memory");
}

__attribute__((noinline)) void guard_bug_release_again(char* p)
{
  std::free(p);
  asm volatile("" : : : "memory");
}

// A correct program: every size class and some large sizes, used within
// bounds, reallocated, freed; reports how many objects were guarded.
__attribute__((noinline)) int correct_program()
{
  char* held[512] = {};
  for (int round = 0; round < 20; round++)
  {
    for (size_t i = 0; i < 512; i++)
    {
      size_t size = 1 + (i * 131 + size_t(round) * 17) % 70000;
      std::free(held[i]);
      held[i] = static_cast<char*>(std::malloc(size));
      std::memset(held[i], int(i), size);
      if (i % 7 == 0)
      {
        held[i] = static_cast<char*>(std::realloc(held[i], size + 100));
        held[i][size + 99] = 1;
      }
    }
  }
  for (char* p : held)
    std::free(p);
  std::printf("guarded %llu\n", (unsigned long long)snmalloc_profile_guarded_total());
  return 0;
}

namespace
{
  sigjmp_buf back_from_handler;

  void program_handler(int, siginfo_t* info, void*)
  {
    char line[64];
    int n = std::snprintf(line, sizeof(line), "program handler saw %p\n", info->si_addr);
    (void)!::write(1, line, size_t(n));
    siglongjmp(back_from_handler, 1);
  }

  // The program's own SIGSEGV handler, installed before guarding starts:
  // a fault outside the guarded slots still reaches it; a guarded one is
  // reported and kills.
  int chain_program()
  {
    struct sigaction sa;
    std::memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = program_handler;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, nullptr);
    if (snmalloc_profile_configure("mode=count,rate=1,guard=64,guard_per_second=1000000") != 0)
      return 2;
    void* page = mmap(nullptr, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (sigsetjmp(back_from_handler, 1) == 0)
      guard_bug_write_byte(static_cast<char*>(page));
    char* p = guard_bug_allocate(SIZE);
    guard_bug_release(p);
    guard_bug_read_byte(p + 8);
    survived();
    return 0;
  }
} // namespace

int main(int argc, char** argv)
{
  if (argc != 2)
    return 2;
  const char* kind = argv[1];
  if (std::strcmp(kind, "correct") == 0)
    return correct_program();
  if (std::strcmp(kind, "chain") == 0)
    return chain_program();
  char* p = guard_bug_allocate(SIZE);
  if (std::strcmp(kind, "overflow-byte") == 0)
    guard_bug_write_byte(p + SIZE);
  else if (std::strcmp(kind, "overflow-page") == 0)
    guard_bug_read_byte(p + SIZE + 4096);
  else if (std::strcmp(kind, "underflow") == 0)
    guard_bug_write_byte(p - 1);
  else if (std::strcmp(kind, "uaf-read") == 0)
  {
    guard_bug_release(p);
    guard_bug_read_byte(p + 8);
  }
  else if (std::strcmp(kind, "uaf-write") == 0)
  {
    guard_bug_release(p);
    guard_bug_write_byte(p + 16);
  }
  else if (std::strcmp(kind, "double-free") == 0)
  {
    guard_bug_release(p);
    guard_bug_release_again(p);
  }
  else
    return 2;
  survived();
}
