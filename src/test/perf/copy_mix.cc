// Copy-heavy work, one thread: what the checks build's bounds-checked
// memcpy family (override/checked_copies.h) costs a program that copies.
//
// A set of live blocks of 16 to 1024 bytes; each operation copies a random
// length from one random block into another, copies a block's head to a
// stack buffer and back, and clears part of a block with memset: four
// calls, of heap objects and of the stack.  Every eighth operation replaces
// a block.  Each copy is checked at its last byte.  One operation = the
// four calls.
#include "fast_random.h"
#include "harness.h"

#include <cstdlib>
#include <cstring>
#include <vector>

namespace
{
  constexpr size_t live_slots = 1024;

  struct Slot
  {
    char* block = nullptr;
    size_t size = 0;
  };

  void fill(Slot& slot, size_t size)
  {
    slot.block = static_cast<char*>(std::malloc(size));
    if (slot.block == nullptr)
      bench::fail("copy-mix: malloc(%zu) returned null", size);
    slot.size = size;
    std::memset(slot.block, static_cast<int>(size), size);
  }

  void expect(const char* what, char found, char expected)
  {
    if (found != expected)
      bench::fail("copy-mix: %s copied %d, expected %d", what, found, expected);
  }
} // namespace

int main(int argc, char** argv)
{
  bench::Options options = bench::parse_options(argc, argv, 20'000'000, 20'000);
  bench::FastRandom random(1);
  std::vector<Slot> live(live_slots);
  char stack_buffer[1024];

  bench::Stopwatch stopwatch;
  for (Slot& slot : live)
    fill(slot, random.between(16, 1024));
  for (uint64_t done = 0; done < options.ops; done++)
  {
    uint64_t r = random.next();
    size_t from_slot = r % live_slots;
    Slot& from = live[from_slot];
    Slot& to = live[(from_slot + 1 + (r >> 16) % (live_slots - 1)) % live_slots]; // another
    size_t most = from.size < to.size ? from.size : to.size;
    size_t length = 1 + (r >> 32) % most;
    std::memcpy(to.block, from.block, length);
    expect("memcpy", to.block[length - 1], from.block[length - 1]);
    std::memcpy(stack_buffer, to.block, length);
    std::memcpy(from.block, stack_buffer, length);
    expect("memcpy via the stack", from.block[length - 1], to.block[length - 1]);
    std::memset(to.block + length / 2, static_cast<int>(r), to.size - length / 2);
    if ((done & 7) == 0)
    {
      std::free(from.block);
      fill(from, random.between(16, 1024));
    }
  }
  for (Slot& slot : live)
    std::free(slot.block);
  bench::Elapsed elapsed = stopwatch.elapsed();

  bench::report("copy-mix", 1, options.ops, elapsed);
  return 0;
}
