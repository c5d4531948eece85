// The checks build's own diagnostics (SNMALLOC_CHECKS=ON): links that do
// not decode, double frees of objects the allocator holds, sized deletes
// of another class, realloc of a freed object, and the bounds-checked
// memcpy family.  Each case runs in a forked child that must end with
// SIGABRT and exactly one line.
#include "support/death.h"

#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <snmalloc/snmalloc.h>
#include <thread>
#include <vector>

using namespace snmalloc_test;

namespace
{
  template<typename F>
  void check_dies_with(F&& f, const std::string& expected)
  {
    ChildEnd end = run_in_child(std::forward<F>(f));
    CHECK(end.signal == SIGABRT);
    CHECK(end.stderr_text == expected);
  }

  void* volatile sink;
} // namespace

TEST_CASE("a link overwritten in the fast list stops the pop", "[checks]")
{
  // A fresh slab's first refill links a chunk's worth of objects (three
  // of 5120 bytes) into the fast list in address order: the one after the
  // first handed out is the list's head.  An overflow of the first
  // overwrites its link; the pop reads it.  The class may have slabs
  // already (the test harness allocates), whose freed objects a refill
  // hands out first, in any order: 256 objects are taken to use those up,
  // then more until one starts a slab.
  check_dies_naming(
    [](auto tell) {
      for (int i = 0; i < 256; i++)
        sink = std::malloc(5120);
      const uintptr_t slab = snmalloc::slab_size_compute(5120);
      char* first;
      do
        first = static_cast<char*>(std::malloc(5120));
      while ((reinterpret_cast<uintptr_t>(first) & (slab - 1)) != 0);
      tell(first + 5120);
      *static_cast<uintptr_t*>(hide(first + 5120)) = 0x4141414141414141; // not memset: checked
      sink = std::malloc(5120);
      sink = std::malloc(5120);
      ::_exit(0);
    },
    "free list corrupted (write after free?) at",
    "");
}

TEST_CASE("an object in the thread's fast list freed is a double free", "[checks]")
{
  // As above: the one after the first handed out is there, never
  // allocated.
  check_dies_naming(
    [](auto tell) {
      char* first = static_cast<char*>(std::malloc(5120));
      void* next = first + 5120;
      tell(next);
      std::free(hide(next));
      ::_exit(0);
    },
    "double free of");
}

TEST_CASE("an object of a slab's untouched part freed is a double free", "[checks]")
{
  // A refill links one 10240-byte object (a chunk's worth): the one after
  // the first handed out is untouched, which the slab's bitmap counts as
  // free.
  check_dies_naming(
    [](auto tell) {
      char* first = static_cast<char*>(std::malloc(10240));
      void* next = first + 10240;
      tell(next);
      std::free(hide(next));
      ::_exit(0);
    },
    "double free of");
}

namespace
{
  // The slab descriptor of an object of a slab, or nullptr (a sampled
  // object, in a profiling build: those keep the profiler's checks only).
  const void* slab_of(const void* p)
  {
    const snmalloc::PagemapEntry& entry = snmalloc::pagemap.entry_of(p);
    if (snmalloc::is_tag(entry.get_owner()))
      return nullptr;
    return reinterpret_cast<const void*>(entry.get_meta());
  }

  // Frees an object of every small class, each written all over first,
  // through `free_it`, and counts the bytes past the link and the mark
  // that are not the poison (zero).  One object of the same slab stays allocated
  // meanwhile, so the slab (and the freed object's memory) is not given
  // back.
  template<typename Free>
  void check_freed_objects_are_poisoned(Free free_it)
  {
    for (snmalloc::sizeclass_t sc = 0; sc < snmalloc::NUM_SMALL_CLASSES; sc++)
    {
      size_t size = snmalloc::sizeclass_to_size(sc);
      std::vector<void*> held;
      void* keep = nullptr;
      void* victim = nullptr;
      for (int tries = 0; tries < 64 && victim == nullptr; tries++)
      {
        void* p = std::malloc(size);
        REQUIRE(p != nullptr);
        if (slab_of(p) == nullptr)
          held.push_back(p);
        else if (keep == nullptr)
          keep = p;
        else if (slab_of(p) == slab_of(keep))
          victim = p;
        else
          held.push_back(p);
      }
      REQUIRE(victim != nullptr);
      std::memset(victim, 0x5a, size);
      free_it(victim);
      const volatile unsigned char* bytes = static_cast<unsigned char*>(hide(victim));
      size_t stale = 0;
      for (size_t i = snmalloc::SlabMeta::POISON_FROM; i < size; i++)
        stale += bytes[i] != snmalloc::SlabMeta::POISON;
      INFO("class " << sc << ", " << size << " bytes");
      CHECK(stale == 0);
      std::free(keep);
      for (void* p : held)
        std::free(p);
    }
  }
} // namespace

TEST_CASE("a freed object holds none of its data, freed by its owner or another thread", "[checks]")
{
  check_freed_objects_are_poisoned([](void* p) { std::free(p); });
  // The freeing thread poisons, then batches the object for its owner;
  // its exit posts the batch.
  check_freed_objects_are_poisoned([](void* p) { std::thread([p] { std::free(p); }).join(); });
}

// calloc clears only an object's link and mark in the checks build: the
// rest must be zero already, for objects freed after use and for objects
// of slabs cut from memory a freed large object left dirty.
TEST_CASE("calloc's objects are zero after objects of the size were filled and freed", "[checks]")
{
  std::vector<char*> blocks;
  for (int i = 0; i < 8; i++)
  {
    blocks.push_back(static_cast<char*>(std::malloc(1024 * 1024)));
    std::memset(blocks.back(), 0x5a, 1024 * 1024);
  }
  for (char* b : blocks)
    std::free(b);
  for (snmalloc::sizeclass_t sc = 0; sc < snmalloc::NUM_SMALL_CLASSES; sc++)
  {
    size_t size = snmalloc::sizeclass_to_size(sc);
    blocks.clear();
    for (int i = 0; i < 64; i++)
    {
      blocks.push_back(static_cast<char*>(std::malloc(size)));
      std::memset(blocks.back(), 0x5a, size);
    }
    for (char* b : blocks)
      std::free(b);
    blocks.clear();
    size_t nonzero = 0;
    for (int i = 0; i < 128; i++)
    {
      char* p = static_cast<char*>(std::calloc(1, size));
      REQUIRE(p != nullptr);
      for (size_t j = 0; j < size; j++)
        nonzero += p[j] != 0;
      blocks.push_back(p);
    }
    INFO("class " << sc << ", " << size << " bytes");
    CHECK(nonzero == 0);
    for (char* b : blocks)
      std::free(b);
  }
}

TEST_CASE("a sized delete with a smaller class's size", "[checks]")
{
  void* p = ::operator new(4096);
  check_dies([p] { ::operator delete(p, 2048); }, "size mismatch on sized free of", p);
  ::operator delete(p, 4096);
}

TEST_CASE("realloc of a freed object", "[checks]")
{
  check_dies_naming(
    [](auto tell) {
      void* p = std::malloc(100);
      tell(p);
      std::free(p);
      sink = std::realloc(hide(p), 120);
      ::_exit(0);
    },
    "double free of");
}

TEST_CASE("the memcpy family checks heap destinations and sources", "[checks]")
{
  char* p = static_cast<char*>(std::malloc(64));
  char* q = static_cast<char*>(std::malloc(64));
  char* big = static_cast<char*>(std::malloc(256 * 1024));
  char stack[128] = {};
  char text[100];
  std::memset(text, 'x', sizeof(text) - 1);
  text[sizeof(text) - 1] = '\0';
  char expected[200];

  std::snprintf(expected, sizeof(expected),
    "snmalloc: fatal: memcpy(): 65 bytes written at %p overflow the 64-byte heap object at %p\n", p, p);
  check_dies_with([&] { std::memcpy(p, stack, 65); }, expected);
  std::snprintf(expected, sizeof(expected),
    "snmalloc: fatal: memmove(): 72 bytes read at %p overflow the 64-byte heap object at %p\n", q, q);
  check_dies_with([&] { std::memmove(stack, q, 72); }, expected);
  std::snprintf(expected, sizeof(expected),
    "snmalloc: fatal: memset(): 32 bytes written at %p overflow the 64-byte heap object at %p\n",
    p + 48, p);
  check_dies_with([&] { std::memset(p + 48, 0, 32); }, expected);
  std::snprintf(expected, sizeof(expected),
    "snmalloc: fatal: strcpy(): 100 bytes written at %p overflow the 64-byte heap object at %p\n", p, p);
  check_dies_with([&] { std::strcpy(p, text); }, expected);
  std::snprintf(expected, sizeof(expected),
    "snmalloc: fatal: strncpy(): 80 bytes written at %p overflow the 64-byte heap object at %p\n", p, p);
  check_dies_with([&] { std::strncpy(p, "short", 80); }, expected);
  std::snprintf(expected, sizeof(expected),
    "snmalloc: fatal: strcat(): 104 bytes written at %p overflow the 64-byte heap object at %p\n", p, p);
  check_dies_with(
    [&] {
      std::strcpy(p, "abcd");
      std::strcat(p, text);
    },
    expected);
  std::snprintf(expected, sizeof(expected),
    "snmalloc: fatal: memcpy(): 262145 bytes written at %p overflow the 262144-byte heap object at %p\n",
    big, big);
  check_dies_with([&] { std::memcpy(big, hide(big), 256 * 1024 + 1); }, expected);
  std::snprintf(expected, sizeof(expected), "snmalloc: fatal: memset(): write to freed heap object at %p\n", q);
  check_dies_with(
    [&] {
      std::free(q);
      std::memset(q, 0, 8);
    },
    expected);

  // In bounds, and memory that is not a heap object, pass.
  std::memcpy(p, stack, 64);
  std::memmove(p + 1, p, 63);
  std::memset(big, 1, 256 * 1024);
  std::memcpy(stack, text, sizeof(stack) - 1);
  std::strcpy(p, "fits");
  std::strcat(p, " and this too");
  CHECK(std::strcmp(p, "fits and this too") == 0);
  std::strncpy(q, "pad", 64);
  CHECK(q[63] == '\0');
  std::free(big);
  std::free(q);
  std::free(p);
}

namespace
{
  // The child must stop with one line, for `fn`, naming the range at `at`
  // and the object it leaves or enters, or the freed object its first
  // byte is in (whichever lies before the object it ends in).
  template<typename F>
  void check_range_stops(F&& f, const char* fn, bool write, size_t n, const void* at)
  {
    ChildEnd end = run_in_child(std::forward<F>(f));
    INFO(end.stderr_text);
    CHECK(end.signal == SIGABRT);
    char range[200];
    std::snprintf(range, sizeof(range), "snmalloc: fatal: %s(): %zu bytes %s at %p ", fn, n,
      write ? "written" : "read", at);
    char freed[100];
    std::snprintf(freed, sizeof(freed), "snmalloc: fatal: %s(): %s freed heap object at ", fn,
      write ? "write to" : "read of");
    CHECK((end.stderr_text.rfind(range, 0) == 0 || end.stderr_text.rfind(freed, 0) == 0));
    CHECK(end.stderr_text.find('\n') == end.stderr_text.size() - 1);
  }
} // namespace

TEST_CASE("a copy that starts before an object and ends in it stops", "[checks]")
{
  for (size_t size : {size_t(16), size_t(4096), size_t(256 * 1024)})
  {
    // The first of its size, so that it may start its slab or run: then
    // what lies before it is no object this copy could be in.
    char* p = static_cast<char*>(std::malloc(size));
    char* source = static_cast<char*>(std::malloc(size));
    std::memset(source, 'x', size);
    // Up to all but the last byte before it (a large run's previous
    // chunks, too).
    for (size_t by : {size_t(1), size / 2, size - 1})
    {
      INFO(size << " bytes, " << by << " before");
      check_range_stops([&] { std::memcpy(hide(p - by), source, size); }, "memcpy", true, size, p - by);
      check_range_stops([&] { std::memmove(source, hide(p - by), size); }, "memmove", false, size, p - by);
    }
    std::free(source);
    std::free(p);
  }
}

TEST_CASE("copies in a large object's later chunks pass, and stop where they enter the next object", "[checks]")
{
  constexpr size_t size = 256 * 1024;
  char* a = static_cast<char*>(std::malloc(size));
  char stack[1000] = {};
  std::memset(a + 100000, 1, size - 100000);
  std::memcpy(a + 200000, stack, sizeof(stack));
  std::memcpy(stack, a + size - sizeof(stack), sizeof(stack));
  std::memmove(a + 150000, a + 100000, 100000);
  // Two runs side by side, as the arena's frontier hands them out (runs
  // freed earlier may come first): a copy from the middle of the first
  // runs into the second.
  std::vector<char*> runs{a};
  char* next = nullptr;
  for (int i = 0; i < 16 && next != runs.back() + size; i++)
  {
    next = static_cast<char*>(std::malloc(size));
    runs.push_back(next);
  }
  if (next != runs[runs.size() - 2] + size)
  {
    // The checks build puts guard pages between large runs (and
    // quarantines freed ones): no two are side by side, and a copy past a
    // run's end faults on its guard (bugs-hardening-checks-large).
    WARN("no two large runs side by side: a copy into the next run cannot be tried");
    for (char* r : runs)
      std::free(r);
    return;
  }
  char* first = runs[runs.size() - 2];
  char expected[200];
  std::snprintf(expected, sizeof(expected),
    "snmalloc: fatal: memset(): 100000 bytes written at %p start before the 262144-byte heap object at %p\n",
    static_cast<void*>(first + 200000), static_cast<void*>(next));
  check_dies_with([&] { std::memset(hide(first + 200000), 0, 100000); }, expected);
  for (char* r : runs)
    std::free(r);
}
