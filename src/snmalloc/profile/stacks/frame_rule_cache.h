#pragma once
// Layer profile/stacks, stage "record": the cache of frame rules by address
// that the built-in walker (stack_capture.h) steps by, and the check that
// forgets them when a library is unloaded.

#include "frame_rules.h"
#include "permanent_code.h"

#include <link.h>

namespace snmalloc::profile
{
  // Frame rules by address, shared by all threads: one 64-bit word an
  // entry, a bit saying whether the entry is at its index or at the other
  // of its pair (ALTERNATE) over the address's bits above the index's (user
  // space: below 2^47) over the rule packed in 28 bits, so a reader sees a
  // whole entry, never half of two.  Two ways: a new entry takes its index
  // and moves the one there, if of code that stays loaded, to the other of
  // the pair, so that two return addresses of one walk at one index (n
  // walked in turn share one in about n^2/8,192 pairs) do not displace each
  // other at every walk, each then read from the tables.  The packing is laid out for the walk,
  // which steps by an entry's bits without unpacking them (with the rule
  // unpacked, a step took 53 instructions).  Rules that do not fit (a frame
  // of 1 MiB) are read from the tables every time.  32 KiB of zeroes until
  // a sample.  An entry for code that may be unloaded (outside
  // PermanentCode) is marked so, and a walk makes or uses one only after it
  // has read the loader's count of unloads, which a walk through permanent
  // code alone never reads.
  class FrameRuleCache
  {
    static constexpr unsigned INDEX_BITS = 12;
    static constexpr uintptr_t INDEX_MASK = (uintptr_t(1) << INDEX_BITS) - 1;
    static constexpr unsigned RULE_BITS = 28;
    static constexpr unsigned HIGH_BITS = 63 - RULE_BITS;
    // The top bit: the entry is at the other index of its pair.  An entry's
    // key, its bits above the rule's, names one address.
    static constexpr uint64_t ALTERNATE = uint64_t(1) << 63;
    static constexpr uint64_t ALTERNATE_KEY = ALTERNATE >> RULE_BITS;
    std::atomic<uint64_t> entries_[size_t(1) << INDEX_BITS] = {};
    // The loader's count of unloaded objects when the entries were made:
    // an address of an unloaded library may come back with other code.
    std::atomic<unsigned long long> unloads_{0};
    // Held while this reads the count: dl_iterate_phdr takes the loader's
    // lock, which a fork() child would inherit held by a thread it does
    // not have; prefork holds this instead.
    SpinLock reading_;
    PermanentCode permanent_;
    // Whether this thread's walk under way has read the count.
    static inline thread_local bool walk_read_unloads_ = false;

    // Bits 9 and 10 of an entry, which a step's bits leave clear: the
    // address may be unloaded, and, for such an entry, it is a step (whose
    // STEP bit is cleared, so that the walk's one test for a usable step
    // fails on it).
    static constexpr uint64_t UNLOADABLE = uint64_t(1) << 9;
    static constexpr uint64_t UNLOADABLE_STEP = uint64_t(1) << 10;

    // The key of `address`'s entry at its index; at the other index of the
    // pair, this | ALTERNATE_KEY.
    static uint64_t key(uintptr_t address)
    {
      return uint64_t(address) >> INDEX_BITS;
    }

    // `address`'s entry, at its index or the other of the pair; 0 if none.
    uint64_t entry_of(uintptr_t address) const
    {
      size_t i = index(address);
      uint64_t k = key(address);
      uint64_t word = entries_[i].load(std::memory_order_relaxed);
      if ((word >> RULE_BITS) == k)
        return word;
      word = entries_[i ^ 1].load(std::memory_order_relaxed);
      return (word >> RULE_BITS) == (k | ALTERNATE_KEY) ? word : 0;
    }

    static bool pack(const FrameRule& rule, uint64_t& bits)
    {
      if (rule.kind != FrameRule::Kind::Step)
      {
        bits = uint64_t(rule.kind) << 1; // not 0: Step is the only kind 0
        return true;
      }
      if (rule.cfa_offset % 8 != 0 || rule.cfa_offset / 8 > int32_t(Step::CFA_WORDS))
        return false;
      bits = Step::STEP | (rule.cfa_from_rbp ? Step::FROM_RBP : 0) |
        uint64_t(rule.cfa_offset / 8) << Step::CFA_SHIFT;
      if (rule.rbp_saved)
      {
        if (rule.rbp_offset % 8 != 0 || rule.rbp_offset > -8 || rule.rbp_offset / 8 <= -64)
          return false;
        bits |= Step::RBP_SAVED | uint64_t(-rule.rbp_offset);
      }
      return true;
    }

    static int count_unloads(dl_phdr_info* info, size_t, void* out)
    {
      *static_cast<unsigned long long*>(out) = info->dlpi_subs;
      return 1; // the first object says it
    }

    // An address not in the cache: its rule, from the tables, cached if it
    // fits.  A rule for code that may be unloaded is cached only after the
    // walk has read the unload count, so that it is kept against the count
    // it was read under (cached before a read that finds an older unload,
    // it would be dropped with the stale ones), and every walk through such
    // code reads the count whether its rules were cached or not (two return
    // addresses of one walk at one index displace each other at every walk).
    SNMALLOC_SLOW_PATH FrameRule rule_at_slow(uintptr_t address)
    {
      bool permanent = permanent_.contains(address);
      if (!permanent && !walk_read_unloads_)
        check_unloads();
      FrameRule rule = frame_rule_at(address);
      uint64_t k = key(address);
      uint64_t bits;
      if ((k >> HIGH_BITS) == 0 && pack(rule, bits))
      {
        if (!permanent)
          bits = (bits & Step::STEP) != 0 ? (bits ^ Step::STEP) | UNLOADABLE | UNLOADABLE_STEP :
                                            bits | UNLOADABLE;
        // The entry there, if at its own index, moves to the other of the
        // pair (an entry already there is dropped); not one for code that
        // may be unloaded, which check_unloads may be clearing meanwhile.
        size_t i = index(address);
        uint64_t displaced = entries_[i].load(std::memory_order_relaxed);
        if (
          displaced != 0 && (displaced & (ALTERNATE | UNLOADABLE)) == 0 &&
          (displaced >> RULE_BITS) != k)
          entries_[i ^ 1].store(displaced | ALTERNATE, std::memory_order_relaxed);
        entries_[i].store(k << RULE_BITS | bits, std::memory_order_relaxed);
      }
      return rule;
    }

  public:
    // A cached step: the bits of an entry whose STEP bit is set, read in
    // place.  Bit 0: a step; 1: the CFA from rbp, not rsp; 2: rbp saved;
    // 3-8: its slot below the CFA, in bytes (a multiple of 8, below 512);
    // 11-27: the CFA's offset from that register, in words.  Terminal kinds
    // are kept as their kind in bits 1-2 with bit 0 clear.  Bits 9-10 mark
    // code that may be unloaded (UNLOADABLE, UNLOADABLE_STEP).
    struct Step
    {
      static constexpr uint64_t STEP = 1;
      static constexpr uint64_t FROM_RBP = 2;
      static constexpr uint64_t RBP_SAVED = 4;
      static constexpr uint64_t RBP_SLOT = 0x1f8;
      static constexpr unsigned CFA_SHIFT = 11;
      static constexpr uint64_t CFA_WORDS = (uint64_t(1) << 17) - 1;

      uint64_t bits;

      bool cfa_from_rbp() const
      {
        return (bits & FROM_RBP) != 0;
      }
      uintptr_t cfa_offset() const
      {
        return uintptr_t(bits >> (CFA_SHIFT - 3)) & (CFA_WORDS << 3);
      }
      bool rbp_saved() const
      {
        return (bits & RBP_SAVED) != 0;
      }
      // rbp's slot is at CFA - this.
      uintptr_t rbp_below_cfa() const
      {
        return uintptr_t(bits & RBP_SLOT);
      }
    };

    // Forget every rule if a library was unloaded since they were made.
    // While another thread reads the count, this one trusts it: that thread
    // may be waiting for the loader's lock held by a dlopen that allocates.
    void check_unloads()
    {
      walk_read_unloads_ = true;
      if (!reading_.try_lock())
        return;
      if (!permanent_.learned())
        permanent_.learn();
      unsigned long long unloads = 0;
      ::dl_iterate_phdr(count_unloads, &unloads);
      if (SNMALLOC_UNLIKELY(unloads != unloads_.load(std::memory_order_relaxed)))
      {
        for (auto& entry : entries_)
          entry.store(0, std::memory_order_relaxed);
        unloads_.store(unloads, std::memory_order_relaxed);
      }
      reading_.unlock();
    }

    // Before a walk: its entries for code that may be unloaded wait for a
    // read of the unload count, which the first walks make at once (until
    // the permanent code is known, every new entry is marked unloadable).
    void start_walk()
    {
      walk_read_unloads_ = false;
      if (SNMALLOC_UNLIKELY(!permanent_.learned()))
        check_unloads();
    }

    void prefork() noexcept
    {
      reading_.hold_for_fork();
    }

    void postfork() noexcept
    {
      reading_.release_after_fork();
    }

  private:
    // Neither a step nor a terminal rule in permanent code at the
    // address's index: an entry at the other index of its pair, one for
    // code that may be unloaded (after the walk's first such entry has it
    // read the unload count), or an address not cached.
    SNMALLOC_SLOW_PATH bool step_at_slow(uintptr_t address, Step& step, FrameRule& rule)
    {
      uint64_t word = entry_of(address);
      if ((word & UNLOADABLE) != 0 && !walk_read_unloads_)
      {
        check_unloads();
        word = entry_of(address);
      }
      if ((word & (Step::STEP | UNLOADABLE_STEP)) != 0)
      {
        step.bits = word;
        return true;
      }
      if ((word & 7) != 0)
        rule.kind = FrameRule::Kind((word >> 1) & 3); // terminal
      else
        rule = rule_at_slow(address);
      return false;
    }

  public:
    // The index of `address`'s entry (the other of its pair: this ^ 1):
    // the low bits mixed with the next ones (return addresses of one
    // function differ in the low bits, of different libraries above them);
    // with the high bits stored, the index gives back the low ones.
    static size_t index(uintptr_t address)
    {
      return size_t((address ^ (address >> INDEX_BITS)) & INDEX_MASK);
    }

    // Whether `address`'s rule is cached and its code permanent: its rule
    // will not change (walk_memo.h).
    bool cached_permanent(uintptr_t address) const
    {
      uint64_t word = entry_of(address);
      return (word & UNLOADABLE) == 0 && (word & 7) != 0;
    }

    // The cached step at `address`, true; or false and its rule in `rule`
    // (any kind, from the cache or the tables).  An entry at the other
    // index of its pair is found by the slow path.
    SNMALLOC_FAST_PATH bool step_at(uintptr_t address, Step& step, FrameRule& rule)
    {
      uint64_t k = key(address);
      uint64_t word = entries_[index(address)].load(std::memory_order_relaxed);
      if (SNMALLOC_LIKELY((word >> RULE_BITS) == k && (word & Step::STEP) != 0))
      {
        step.bits = word;
        return true;
      }
      if ((word >> RULE_BITS) == k && (word & UNLOADABLE) == 0 && (word & 7) != 0)
      {
        rule.kind = FrameRule::Kind((word >> 1) & 3); // terminal
        return false;
      }
      return step_at_slow(address, step, rule);
    }
  };

  inline FrameRuleCache frame_rule_cache;
} // namespace snmalloc::profile
