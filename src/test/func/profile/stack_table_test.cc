// profile/stack_table.h on its own: stacks and (stack, size, requested
// size) sites interned through the hash indexes' growth, ids dense and
// stable, each site's cumulative counts exact, and every site naming the
// one shared entry of its stack with that stack's frames.
#include <snmalloc/snmalloc.h>

#include <catch2/catch.hpp>
#include <map>
#include <tuple>
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
  using Key = std::tuple<size_t, size_t, size_t>; // depth, size, requested
  std::map<Key, uint32_t> ids;
  std::map<uint32_t, double> objects;
  // 3 stacks x 25,000 requested sizes (far past the first indexes' 4,096
  // slots), every site recorded twice, the second time in another order.
  constexpr size_t sizes = 25'000;
  for (int pass = 0; pass < 2; pass++)
  {
    for (size_t i = 0; i < sizes; i++)
    {
      size_t requested = pass == 0 ? i + 1 : sizes - i;
      for (size_t depth : depths)
      {
        size_t size = (requested + 15) & ~size_t(15);
        double w = double(depth + pass);
        uint32_t id = table.record(frames, depth, size, requested, w, w * double(size));
        REQUIRE(id != StackTable::NO_ID);
        auto [it, inserted] = ids.try_emplace(Key{depth, size, requested}, id);
        if (pass == 0)
        {
          REQUIRE(inserted);
          REQUIRE(id == ids.size() - 1); // dense, in first-seen order
        }
        else
          REQUIRE(it->second == id); // stable through growth
        objects[id] += w;
      }
    }
  }
  REQUIRE(ids.size() == 3 * sizes);

  // Copied out first: for_each holds the table's lock, as stack_of does.
  std::vector<SiteEntry> sites;
  table.for_each([&](const SiteEntry& site) { sites.push_back(site); });
  REQUIRE(sites.size() == 3 * sizes);
  std::map<size_t, const StackEntry*> stack_by_depth;
  for (uint32_t id = 0; id < sites.size(); id++)
  {
    const SiteEntry& site = sites[id];
    const StackEntry* stack = site.stack;
    REQUIRE(table.stack_of(id) == stack);
    // One entry per stack, whatever the site.
    auto [it, inserted] = stack_by_depth.try_emplace(stack->depth, stack);
    REQUIRE(it->second == stack);
    if (inserted)
      for (size_t f = 0; f < stack->depth; f++)
        REQUIRE(stack->frames[f] == frames[f]);
    REQUIRE(ids.at(Key{stack->depth, site.object_size, site.requested_size}) == id);
    // Small integers: the sums are exact.
    REQUIRE(site.alloc_objects == objects.at(id));
    REQUIRE(site.alloc_bytes == objects.at(id) * double(site.object_size));
  }
  REQUIRE(stack_by_depth.size() == 3);
  REQUIRE(table.stack_of(uint32_t(3 * sizes)) == nullptr);
  REQUIRE(table.os_bytes() > 0);
}
