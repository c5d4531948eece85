// Larson-like server workload: each thread keeps a live set of slots and
// replaces random slots with blocks of new random sizes; every so often it
// hands a handful of its live blocks to the next thread, which frees them.
// Objects thus outlive the thread-local picture and are freed remotely,
// as requests handed between server threads are.
//
// One operation = one slot replaced (a free and a malloc).
#include "block_stamp.h"
#include "fast_random.h"
#include "harness.h"

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

namespace
{
  constexpr size_t live_slots = 1024;
  constexpr size_t min_size = 16;
  constexpr size_t max_size = 512;
  constexpr uint64_t handoff_interval = 256;
  constexpr size_t handoff_count = 32;
  constexpr size_t mailbox_capacity = 4096;

  struct Block
  {
    void* address = nullptr;
    size_t size = 0;
  };

  // Blocks sent to a thread for it to free.  Capacity is reserved up front
  // so that posting never allocates; a sender that finds it full frees the
  // blocks itself.
  class Mailbox
  {
    std::mutex lock_;
    std::vector<Block> blocks_;

  public:
    Mailbox()
    {
      blocks_.reserve(mailbox_capacity);
    }

    bool post(const Block& block)
    {
      std::lock_guard<std::mutex> guard(lock_);
      if (blocks_.size() == blocks_.capacity())
        return false;
      blocks_.push_back(block);
      return true;
    }

    // Swaps the contents into `into` (same reserved capacity) so that the
    // frees happen outside the lock.
    void collect(std::vector<Block>& into)
    {
      std::lock_guard<std::mutex> guard(lock_);
      blocks_.swap(into);
    }
  };

  void free_block(const Block& block)
  {
    bench::verify_block(block.address, block.size, "larson");
    std::free(block.address);
  }

  void free_mail(Mailbox& mailbox, std::vector<Block>& scratch)
  {
    mailbox.collect(scratch);
    for (const Block& block : scratch)
      free_block(block);
    scratch.clear();
  }

  Block new_block(bench::FastRandom& random)
  {
    size_t size = random.between(min_size, max_size);
    void* address = std::malloc(size);
    if (address == nullptr)
      bench::fail("larson: malloc(%zu) returned null", size);
    bench::stamp_block(address, size);
    return Block{address, size};
  }

  struct Shared
  {
    std::vector<Mailbox> mailboxes;
    std::atomic<unsigned> still_sending;
    uint64_t ops_per_thread;
  };

  void worker(Shared& shared, unsigned self)
  {
    unsigned threads = static_cast<unsigned>(shared.mailboxes.size());
    Mailbox& inbox = shared.mailboxes[self];
    Mailbox& next = shared.mailboxes[(self + 1) % threads];
    bench::FastRandom random(self + 1);
    std::vector<Block> scratch;
    scratch.reserve(mailbox_capacity);
    std::vector<Block> live(live_slots);
    for (Block& slot : live)
      slot = new_block(random);

    for (uint64_t op = 1; op <= shared.ops_per_thread; op++)
    {
      Block& slot = live[random.below(live_slots)];
      free_block(slot);
      slot = new_block(random);

      if (op % handoff_interval == 0)
      {
        for (size_t i = 0; i < handoff_count; i++)
        {
          Block& handed = live[random.below(live_slots)];
          if (!next.post(handed))
            free_block(handed);
          handed = new_block(random);
        }
        free_mail(inbox, scratch);
      }
    }

    // Blocks may still arrive until every thread has stopped sending.
    shared.still_sending--;
    while (shared.still_sending.load() != 0)
    {
      free_mail(inbox, scratch);
      std::this_thread::yield();
    }
    free_mail(inbox, scratch);
    for (const Block& slot : live)
      free_block(slot);
  }
} // namespace

int main(int argc, char** argv)
{
  bench::Options options = bench::parse_options(argc, argv, 30'000'000, 20'000);
  Shared shared{std::vector<Mailbox>(options.threads), {options.threads}, options.ops / options.threads};

  bench::Elapsed elapsed =
    bench::run_threads(options.threads, [&](unsigned i) { worker(shared, i); });

  bench::report("larson", options.threads, shared.ops_per_thread * options.threads, elapsed);
  return 0;
}
