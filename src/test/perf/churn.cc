// Small-object churn, one thread: the allocator's fast paths under a mix
// of sizes from 8 to 1024 bytes, skewed to small ones as real programs are.
//
// Each operation replaces a random slot of a long-lived set (malloc/free or
// new[]/delete[], half each); every 16 operations a burst of short-lived
// objects is allocated and freed in reverse order, like temporaries.
// One operation = one allocation and its free.
#include "block_stamp.h"
#include "fast_random.h"
#include "harness.h"

#include <cstdlib>
#include <new>
#include <vector>

namespace
{
  constexpr size_t live_slots = 4096;
  constexpr size_t burst_length = 64;

  // Power-of-two buckets 8..1023 with each bucket half as likely as the
  // one below it, uniform within a bucket; the mean is near 48 bytes.
  size_t skewed_small_size(bench::FastRandom& random)
  {
    size_t bucket = 3;
    while (bucket < 9 && (random.next() & 1) != 0)
      bucket++;
    size_t low = size_t{1} << bucket;
    return random.between(low, 2 * low - (bucket == 9 ? 0 : 1));
  }

  struct Slot
  {
    char* block = nullptr;
    size_t size = 0;
    bool from_new = false;
  };

  void fill(Slot& slot, size_t size, bool from_new)
  {
    slot.block = from_new ? new char[size] : static_cast<char*>(std::malloc(size));
    if (slot.block == nullptr)
      bench::fail("churn: malloc(%zu) returned null", size);
    slot.size = size;
    slot.from_new = from_new;
    bench::stamp_block(slot.block, size);
  }

  void release(Slot& slot)
  {
    bench::verify_block(slot.block, slot.size, "churn");
    if (slot.from_new)
      delete[] slot.block;
    else
      std::free(slot.block);
    slot.block = nullptr;
  }
} // namespace

int main(int argc, char** argv)
{
  bench::Options options = bench::parse_options(argc, argv, 30'000'000, 20'000);
  bench::FastRandom random(1);
  std::vector<Slot> live(live_slots);
  Slot burst[burst_length];

  bench::Stopwatch stopwatch;
  for (Slot& slot : live)
    fill(slot, skewed_small_size(random), false);

  uint64_t done = 0;
  while (done < options.ops)
  {
    uint64_t r = random.next();
    Slot& slot = live[r % live_slots];
    release(slot);
    fill(slot, skewed_small_size(random), (r >> 32) & 1);
    done++;

    if ((done & 15) == 0)
    {
      for (Slot& temporary : burst)
        fill(temporary, skewed_small_size(random), false);
      for (size_t i = burst_length; i-- > 0;)
        release(burst[i]);
      done += burst_length;
    }
  }
  for (Slot& slot : live)
    release(slot);
  bench::Elapsed elapsed = stopwatch.elapsed();

  bench::report("churn", 1, done, elapsed);
  return 0;
}
