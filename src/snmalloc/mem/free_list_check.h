#pragma once
// Layer mem: the check of a slab's whole free list, made in every build
// before the slab is released and when refill finds its counter run past
// capacity by a double free, and the report that names the object at
// fault: SlabMeta::check_free_list and report_free_list, declared with the
// descriptor (mem/slab_meta.h, which includes this header after the
// class).  Defined as its members, reading its fields: as functions taking
// the fields, each release went through a call that passed them
// (perf-random-replace under callgrind: 1,148 instructions more in the
// shim).

#include "slab_meta.h"

#include <utility>

namespace snmalloc
{
  // The free list must hold each of the slab's `expected` touched objects
  // (its first ones; the rest are untouched) once.  Read in address order,
  // not along the list: a slab freed in random order over a large heap is
  // a chain of cache misses along its list, where loads in address order
  // overlap (perf-peak-growth frees its 1.75 M blocks at the end: 770 k of
  // its 6.4 M last-level read misses in callgrind's model were this walk
  // along the list).  The list's head and the objects' links are expected
  // + 1 pointers: if each is null or one of those objects, and none names
  // an object another named nor a second null, each object is named once
  // and one is last.  Pushes that repeat an object (a double free) always
  // leave some object named twice, by the head or by the links of the
  // objects pushed after each of its pushes (checked exhaustively for
  // every sequence of up to 7 pushes); a link overwritten after its free
  // names another object twice or a second null.  report_free_list then
  // walks the list to name the culprit.
  void SlabMeta::check_free_list(uint32_t expected) const
  {
    // How many of the pointers named each object so far (0 or 1).
    uint8_t named[MAX_CAPACITY];
    for (uint32_t i = 0; i < expected; i++)
      named[i] = 0;
    const uintptr_t base = owner_base;
    const sizeclass_t sc = owner_sizeclass;
    bool ended = false;
    // Whether f, one of the expected + 1 pointers, names what no other
    // did.  (An offset past the slab, below it too, has an index past
    // `expected`.)
    auto name_once = [&](const FreeObject* f) {
      if (f == nullptr)
        return !std::exchange(ended, true);
      SlabPosition at = position_in_slab(reinterpret_cast<uintptr_t>(f) - base, sc);
      if (!at.at_start || at.index >= expected || named[at.index] != 0)
        return false;
      named[at.index] = 1;
      return true;
    };
    if (SNMALLOC_UNLIKELY(!name_once(free)))
      report_free_list(expected);
    size_t size = sizeclass_to_size(sc);
    for (uint32_t i = 0; i < expected; i++)
    {
      const FreeObject* object = FreeObject::from(reinterpret_cast<void*>(base + i * size));
      if (SNMALLOC_UNLIKELY(!name_once(object->next_relaxed())))
        report_free_list(expected);
    }
  }

  // check_free_list failed: report the first object of the list that is
  // not one of `expected` distinct object starts of this slab: met twice
  // (double free), not at an object start (a local interior free), or
  // outside the slab (a link written after its object was freed); an
  // "object" in the slack past the last one is an interior pointer.  One
  // step past `expected`, so that a list one longer, through a double
  // free, shows its repeated object.
  void SlabMeta::report_free_list(uint32_t expected) const
  {
    uint64_t seen[MAX_CAPACITY / 64] = {};
    size_t size = sizeclass_to_size(sizeclass);
    const FreeObject* f = free;
    uint32_t n = 0;
    for (; n <= expected && f != nullptr; n++, f = f->next_relaxed())
    {
      uintptr_t offset = reinterpret_cast<uintptr_t>(f) - base;
      if (offset >= slab_size())
        report_fatal_at("free list corrupted (write after free?) at", f);
      size_t index = offset / size;
      if (offset % size != 0 || index >= sizeclasses.capacity[sizeclass])
        report_bad_free(BadFree::Interior, f);
      uint64_t bit = uint64_t(1) << (index % 64);
      if ((seen[index / 64] & bit) != 0)
        report_bad_free(BadFree::DoubleFree, f);
      seen[index / 64] |= bit;
    }
    report_fatal_at("free list corrupted (write after free?) in slab", reinterpret_cast<void*>(base));
  }
} // namespace snmalloc
