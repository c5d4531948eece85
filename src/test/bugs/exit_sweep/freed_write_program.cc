// A program that writes into a small object after freeing it and then ends
// normally, never allocating that object again: only the checks build's
// sweep at exit (global/freed_sweep.h) can see the write.
//
//   freed_write_program SIZE WHERE WHO SEED
//     SIZE   bytes of each object
//     WHERE  none (no write: the control), word0 (the first 8 bytes),
//            word1 (the next 8), zero0 (zero into the first 8)
//     WHO    main: main allocates and frees; exited: a thread allocates
//            and frees, then exits; cross: main allocates, a thread frees
//     SEED   which objects are freed, and which of them is written
//
// Between 20 and 99 objects are allocated; a random half are freed (the
// victim among them) and the rest stay live to the end, so the victim's
// slab is not released and stays readable.  The victim's address goes to
// stdout before the write.  Nothing else the program does allocates an
// object of SIZE's class between the frees and the write.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <malloc.h>
#include <random>
#include <thread>
#include <unistd.h>
#include <vector>

namespace
{
  struct Plan
  {
    size_t size;
    std::vector<void*> objects;
    std::vector<size_t> freed;
    size_t victim;
  };

  void allocate(Plan& plan)
  {
    for (void*& p : plan.objects)
    {
      p = std::malloc(plan.size);
      if (p == nullptr)
        std::abort();
      std::memset(p, 0x5a, plan.size);
    }
  }

  void free_some(Plan& plan)
  {
    for (size_t i : plan.freed)
      std::free(plan.objects[i]);
  }

  // Other traffic after the write, of other classes (three times the size
  // and more), all freed again.  The pointers are kept on the stack: a
  // growing vector's buffer could be of the victim's class.
  void unrelated_traffic(size_t size)
  {
    void* keep[200];
    for (size_t i = 0; i < 200; i++)
      keep[i] = std::malloc(size * 3 + 8 * (i % 7));
    for (void* p : keep)
      std::free(p);
  }
} // namespace

int main(int argc, char** argv)
{
  if (argc != 5)
  {
    std::fprintf(stderr, "usage: %s SIZE none|word0|word1|zero0 main|exited|cross SEED\n", argv[0]);
    return 2;
  }
  Plan plan;
  plan.size = std::strtoul(argv[1], nullptr, 10);
  std::string where = argv[2], who = argv[3];
  std::mt19937_64 random(std::strtoull(argv[4], nullptr, 10));
  plan.objects.resize(20 + random() % 80);
  for (size_t i = 0; i < plan.objects.size(); i++)
    if (random() % 2 == 0)
      plan.freed.push_back(i);
  if (plan.freed.empty())
    plan.freed.push_back(0);
  plan.victim = plan.freed[random() % plan.freed.size()];

  if (who == "main")
  {
    allocate(plan);
    free_some(plan);
  }
  else if (who == "exited")
  {
    std::thread([&] {
      allocate(plan);
      free_some(plan);
    }).join();
  }
  else
  {
    allocate(plan);
    std::thread([&] { free_some(plan); }).join();
    // Bring the other thread's frees home to main's allocator (a trim
    // handles its messages), so that the write lands in an object on its
    // slab's list rather than in one still travelling.
    malloc_trim(0);
  }

  char* victim = static_cast<char*>(plan.objects[plan.victim]);
  // Not printf: stdio's buffer, allocated at its first use, could be the
  // victim itself.
  char line[32];
  int n = std::snprintf(line, sizeof(line), "%p\n", static_cast<void*>(victim));
  if (::write(1, line, size_t(n)) != n)
    return 2;
  volatile uint64_t* words = reinterpret_cast<volatile uint64_t*>(victim);
  if (where == "word0")
    words[0] = 0x4242424242424242;
  else if (where == "word1")
    words[1] = 0x4343434343434343;
  else if (where == "zero0")
    words[0] = 0;
  unrelated_traffic(plan.size);
  return 0;
}
