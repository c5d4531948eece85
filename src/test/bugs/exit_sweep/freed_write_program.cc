// A program that writes into a small object after freeing it and then ends
// normally, never allocating that object again: only the checks build's
// sweep at exit (global/freed_sweep.h) can see the write.
//
//   freed_write_program SIZE WHERE WHO SEED
//     SIZE   bytes of each object
//     WHERE  none (no write: the control), word0 (the first 8 bytes),
//            word1 (the next 8), zero0 (zero into the first 8)
//     WHO    where the freed object is when the program ends:
//            main: main allocated and freed it (on its slab's list);
//            exited: a thread allocated and freed it, then exited (an
//              idle allocator's slab);
//            cross: main allocated it, a thread freed it, and a trim
//              brought the free home (main's slab);
//            inbox: the same without the trim (still in main's inbox,
//              or its slab's list if an allocation took the message);
//            idle-inbox: a thread allocated it and exited, main freed it
//              (in main's cache of frees for other threads);
//            fast: main freed it and then allocated until a refill took
//              its list (in main's fast list)
//     SEED   which objects are freed, and which of them is written
//
// Between 20 and 99 objects are allocated, and a random half of those at
// odd positions but the last are freed (the victim among them): every
// slab the run touched keeps a live object, so none is released and the
// victim stays readable.  The victim's address goes to stdout before the
// write.  Nothing else the program does allocates an object of SIZE's
// class between the frees and the write.  Status 3: the shape was not
// reached (fast: the victim came back before its successor).
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
  for (size_t i = 1; i + 1 < plan.objects.size(); i += 2)
    if (random() % 2 == 0)
      plan.freed.push_back(i);
  if (plan.freed.size() < 2)
    plan.freed = {1, 3};
  // Not the last freed: `fast` needs one freed after it.
  size_t victim_at = random() % (plan.freed.size() - 1);
  plan.victim = plan.freed[victim_at];

  if (who == "main" || who == "fast")
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
  else if (who == "cross" || who == "inbox")
  {
    allocate(plan);
    std::thread([&] { free_some(plan); }).join();
    // A trim handles main's messages: the object is then on its slab's
    // list rather than still travelling.
    if (who == "cross")
      malloc_trim(0);
  }
  else if (who == "idle-inbox")
  {
    std::thread([&] { allocate(plan); }).join();
    free_some(plan);
  }
  else
    return 2;

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
  if (who == "fast")
  {
    // The slab's list is last freed first: the refill that hands out the
    // object freed after the victim leaves the victim next in the fast
    // list.  What comes back before stays live.
    void* successor = plan.objects[plan.freed[victim_at + 1]];
    for (int i = 0; i < 100000; i++)
    {
      void* p = std::malloc(plan.size);
      if (p == victim)
        return 3;
      if (p == successor)
        break;
    }
  }
  unrelated_traffic(plan.size);
  return 0;
}
