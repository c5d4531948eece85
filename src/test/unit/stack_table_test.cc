// profile/stacks/stack_table.h on its own: stacks and (stack, object size) sites
// interned through the hash indexes' growth, ids dense and stable, each
// site's cumulative counts exact, its requested size kept only while every
// allocation there asked for the same, and every site naming the one
// shared entry of its stack with that stack's frames; the same for
// samples from one stack in a row, which reuse the thread's last stack.
#include <snmalloc/profile/stacks/stack_table.h>

#include <catch2/catch.hpp>
#include <vector>

using namespace snmalloc::profile;

namespace
{
  // Three stacks, two of them a prefix of the third: same frames, other
  // depths, so distinct stacks.
  constexpr uintptr_t frames[] = {0x401000, 0x402000, 0x403000, 0x404000, 0x405000};
  constexpr size_t depths[] = {2, 3, 5};
} // namespace

TEST_CASE("the stack table interns stacks and sites, counts exactly, through growth")
{
  static StackTable table; // 32 KiB of block pointers: not on the stack
  // 3 stacks x 5,000 object sizes: 15,000 sites, past three growths of
  // the site index (4,096 slots at first, grown at half load) and across
  // a site block (8,192 sites); every site recorded twice, the second time
  // in the other order, asking for the same size again at even sizes and
  // for another at odd ones.  Mismatches are counted and asserted once: a
  // REQUIRE per site took minutes in the Debug + UBSan build.
  constexpr size_t sizes = 5'000;
  constexpr size_t sites = 3 * sizes;
  auto size_of = [](size_t n) { return 16 * n; }; // n = 1..sizes
  auto requested_of = [&](size_t n, int pass) { return size_of(n) - 1 - size_t(pass) * (n % 2); };
  // Sites are first seen in (size, stack) order: id = 3 (n - 1) + stack.
  auto expected_id = [](size_t n, size_t stack) { return uint32_t(3 * (n - 1) + stack); };
  size_t wrong_ids = 0;
  for (int pass = 0; pass < 2; pass++)
  {
    for (size_t i = 0; i < sizes; i++)
    {
      size_t n = pass == 0 ? i + 1 : sizes - i;
      for (size_t stack = 0; stack < 3; stack++)
      {
        // Count mode: a sample's weight is its interval, here a small
        // integer, one more when the sizes are gone through again.
        SampleRate rate{SampleMode::Count, stack + 1 + size_t(pass)};
        size_t size = size_of(n);
        StackTable::SiteKey key = table.key(frames, depths[stack], size, 0);
        StackTable::Recorded site =
          table.record(key, frames, depths[stack], size, requested_of(n, pass), rate);
        wrong_ids += site.id != expected_id(n, stack) || site.weight != double(rate.interval);
      }
    }
  }
  REQUIRE(wrong_ids == 0); // dense, in first-seen order, stable through growth

  // Copied out first: for_each holds the table's lock, as stack_of does.
  std::vector<SiteEntry> copy;
  table.for_each([&](const SiteEntry& site) { copy.push_back(site); });
  REQUIRE(copy.size() == sites);
  const StackEntry* stack_entry[3] = {copy[0].stack, copy[1].stack, copy[2].stack};
  for (size_t stack = 0; stack < 3; stack++)
  {
    REQUIRE(stack_entry[stack]->depth == depths[stack]);
    for (size_t f = 0; f < depths[stack]; f++)
      REQUIRE(stack_entry[stack]->frames[f] == frames[f]);
  }
  REQUIRE(stack_entry[0] != stack_entry[1]);
  REQUIRE(stack_entry[1] != stack_entry[2]);
  size_t wrong_sites = 0;
  for (uint32_t id = 0; id < sites; id++)
  {
    const SiteEntry& site = copy[id];
    size_t stack = id % 3;
    size_t n = id / 3 + 1;
    // One shared entry per stack; the requested size where both passes
    // asked for the same, else 0; the counts of both passes, exactly
    // (small integers).
    size_t requested = n % 2 == 0 ? size_of(n) - 1 : 0;
    double objects = double(stack + 1) + double(stack + 2);
    bool right = site.stack == stack_entry[stack] && table.stack_of(id) == site.stack &&
      site.requested_size == requested && site.object_size == size_of(n) &&
      site.alloc_objects == objects && site.alloc_bytes == objects * double(size_of(n));
    wrong_sites += !right;
  }
  REQUIRE(wrong_sites == 0);
  REQUIRE(table.stack_of(uint32_t(sites)) == nullptr);
  REQUIRE(table.os_bytes() > 0);
}

TEST_CASE("samples from one stack in a row find its entry and sites as others do")
{
  // The thread's last stack (LastStack) stands in for hashing and comparing
  // the frames: the same stack at 100 sizes in a row, twice, then another
  // stack between two samples of the first, must give the ids and counts
  // that interning by the frames gives.
  static StackTable table;
  auto record = [&](size_t depth, size_t size) {
    StackTable::SiteKey key = table.key(frames, depth, size, 0);
    return table.record(key, frames, depth, size, size, {SampleMode::Count, 1}).id;
  };
  size_t wrong_ids = 0;
  for (int pass = 0; pass < 2; pass++)
  {
    for (size_t n = 1; n <= 100; n++)
      wrong_ids += record(5, 16 * n) != uint32_t(n - 1);
  }
  REQUIRE(wrong_ids == 0);
  REQUIRE(record(3, 16) == 100);
  REQUIRE(record(5, 16) == 0);
  REQUIRE(record(3, 16) == 100);
  REQUIRE(record(3, 32) == 101);

  std::vector<SiteEntry> copy;
  table.for_each([&](const SiteEntry& site) { copy.push_back(site); });
  REQUIRE(copy.size() == 102);
  REQUIRE(copy[0].stack->depth == 5);
  REQUIRE(copy[100].stack->depth == 3);
  REQUIRE(copy[101].stack == copy[100].stack);
  size_t wrong_sites = 0;
  for (size_t id = 0; id < 100; id++)
  {
    double objects = id == 0 ? 3 : 2;
    wrong_sites += copy[id].stack != copy[0].stack || copy[id].alloc_objects != objects;
  }
  REQUIRE(wrong_sites == 0);
  REQUIRE(copy[100].alloc_objects == 2);
}
