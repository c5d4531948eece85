// profile/stacks/frame_rule_cache.h on a cache of the test's own: return
// addresses that share an index stay cached together, two of them at
// once, and whatever the cache holds, a lookup gives the address's own
// rule from the unwind tables, never a neighbour's.  The addresses are
// inside two runs of 16 KiB of no-ops, each a function of its own, so any
// address there has a rule (the function's, after its prologue).
#include <snmalloc/profile/stacks/frame_rule_cache.h>

#include <catch2/catch.hpp>
#include <memory>

using namespace snmalloc::profile;

namespace
{
  // Each 4 KiB of addresses holds one address at each index; the no-ops
  // of a sled of 8 KiB less its ends held only one at some indices (where
  // the loader placed it), and the test needs two in one sled.
  constexpr size_t SLED = 16384;
#define SLED_OF_NOPS ".rept 16384\n nop\n .endr"

  extern "C" __attribute__((noinline)) void sled_one()
  {
    asm volatile(SLED_OF_NOPS);
  }

  extern "C" __attribute__((noinline)) void sled_two()
  {
    asm volatile(SLED_OF_NOPS);
  }

  // The first address inside the sled at `index` after `after` (past
  // its first 64 bytes and before its last: the no-ops, not the prologue
  // or the return); 0 if none.
  uintptr_t at_index(void (*sled)(), size_t index, uintptr_t after = 0)
  {
    uintptr_t from = reinterpret_cast<uintptr_t>(sled) + 64;
    for (uintptr_t a = from > after ? from : after + 1; a < from + SLED - 128; a++)
    {
      if (FrameRuleCache::index(a) == index)
        return a;
    }
    return 0;
  }

  // What the cache says at `address`, as the tables' rule would say it.
  FrameRule looked_up(FrameRuleCache& cache, uintptr_t address)
  {
    FrameRuleCache::Step step;
    FrameRule rule;
    if (!cache.step_at(address, step, rule))
      return rule;
    rule.kind = FrameRule::Kind::Step;
    rule.cfa_from_rbp = step.cfa_from_rbp();
    rule.cfa_offset = int32_t(step.cfa_offset());
    rule.rbp_saved = step.rbp_saved();
    rule.rbp_offset = rule.rbp_saved ? -int32_t(step.rbp_below_cfa()) : 0;
    return rule;
  }

  bool same(const FrameRule& a, const FrameRule& b)
  {
    return a.kind == b.kind &&
      (a.kind != FrameRule::Kind::Step ||
       (a.cfa_from_rbp == b.cfa_from_rbp && a.cfa_offset == b.cfa_offset &&
        a.rbp_saved == b.rbp_saved && (!a.rbp_saved || a.rbp_offset == b.rbp_offset)));
  }
} // namespace

TEST_CASE("return addresses at one index stay cached, two at a time, each with its own rule")
{
  if (snmalloc::config::unwinder != snmalloc::config::Unwinder::Builtin)
    return; // the library walkers keep no rules
  for (size_t index : {size_t(0), size_t(1), size_t(1234), size_t(4095)})
  {
    CAPTURE(index);
    auto cache = std::make_unique<FrameRuleCache>();
    cache->start_walk(); // learns which code stays loaded: this program does
    uintptr_t one = at_index(sled_one, index);
    uintptr_t two = at_index(sled_two, index);
    uintptr_t three = at_index(sled_two, index, two);
    REQUIRE(one != 0);
    REQUIRE(two != 0);
    REQUIRE(three != 0);
    FrameRule rule_one = frame_rule_at(one);
    FrameRule rule_two = frame_rule_at(two);
    REQUIRE(rule_one.kind == FrameRule::Kind::Step);
    CHECK_FALSE(cache->cached_permanent(one));
    CHECK(same(looked_up(*cache, one), rule_one));
    CHECK(same(looked_up(*cache, two), rule_two));
    // Both stay, whichever is looked up.
    for (int round = 0; round < 3; round++)
    {
      CHECK(cache->cached_permanent(one));
      CHECK(cache->cached_permanent(two));
      CHECK(same(looked_up(*cache, one), rule_one));
      CHECK(same(looked_up(*cache, two), rule_two));
    }
    // The address one byte over has the other index of the pair and the
    // same high bits: it must not find `one`'s entry, moved there.
    CHECK(FrameRuleCache::index(one ^ 1) == (index ^ 1));
    CHECK_FALSE(cache->cached_permanent(one ^ 1));
    // A third at the index takes it, and one of the first two is dropped;
    // every lookup still gives its own address's rule.
    CHECK(same(looked_up(*cache, three), frame_rule_at(three)));
    CHECK(cache->cached_permanent(three));
    CHECK(cache->cached_permanent(one) != cache->cached_permanent(two));
    for (uintptr_t a : {one, two, three, one ^ 1})
      CHECK(same(looked_up(*cache, a), frame_rule_at(a)));
  }
  sled_one();
  sled_two();
}
