// The heap census (snmalloc_heap_walk) against the program's own record of
// what it holds: the same pointers, each once, with malloc_usable_size.
// Objects of many sizes and shapes (small, large, aligned, calloc, realloc,
// malloc(0)), freed in random order, by their own thread or by another.
//
// The census sees every object of the heap, the test executable's own
// (Catch2's) too.  So each case takes a census before it starts and one
// at the end, and allocates nothing in between but the objects it
// records: its books are in memory mapped from the OS.  The census at the
// end must then be the one before, plus every object the case holds.
#include "support/alloc_checks.h"

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <cstring>
#include <malloc.h>
#include <pthread.h>
#include <random>
#include <snmalloc/snmalloc_stats.h>
#include <sys/mman.h>

using namespace snmalloc_test;

namespace
{
  // Memory straight from the OS, zeroed.
  template<typename T>
  T* os_array(size_t n)
  {
    void* p = ::mmap(nullptr, n * sizeof(T), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(p != MAP_FAILED);
    return static_cast<T*>(p);
  }

  // Pointer -> usable size, open addressing, in OS memory.  Sizes are
  // stored plus one, so that 0 marks an empty slot.
  class PointerTable
  {
    static constexpr size_t SLOTS = size_t(1) << 20;
    struct Slot
    {
      uintptr_t key;
      size_t size_plus_one;
    };
    Slot* slots_ = os_array<Slot>(SLOTS);
    size_t count_ = 0;

    Slot& find(const void* p) const
    {
      uintptr_t key = reinterpret_cast<uintptr_t>(p);
      for (size_t i = mix(key) & (SLOTS - 1);; i = (i + 1) & (SLOTS - 1))
      {
        if (slots_[i].key == key || slots_[i].size_plus_one == 0)
          return slots_[i];
      }
    }

  public:
    PointerTable() = default;
    PointerTable(const PointerTable&) = delete;
    PointerTable& operator=(const PointerTable&) = delete;
    ~PointerTable()
    {
      ::munmap(slots_, SLOTS * sizeof(Slot));
    }

    // False if p was there already.
    bool insert(const void* p, size_t size)
    {
      Slot& s = find(p);
      if (s.size_plus_one != 0)
        return false;
      s = {reinterpret_cast<uintptr_t>(p), size + 1};
      count_++;
      return true;
    }

    // The size of p, or -1 if it is not there.
    int64_t size_of(const void* p) const
    {
      const Slot& s = find(p);
      return s.size_plus_one == 0 ? -1 : int64_t(s.size_plus_one - 1);
    }

    size_t count() const
    {
      return count_;
    }

    template<typename F>
    void for_each(F&& f) const
    {
      for (size_t i = 0; i < SLOTS; i++)
      {
        if (slots_[i].size_plus_one != 0)
          f(reinterpret_cast<void*>(slots_[i].key), size_t(slots_[i].size_plus_one - 1));
      }
    }
  };

  // One census into a table; counts objects visited twice.
  struct Census
  {
    PointerTable objects;
    size_t visited_twice = 0;

    Census()
    {
      snmalloc_heap_walk(
        [](void* p, size_t size, void* arg) {
          auto* self = static_cast<Census*>(arg);
          if (!self->objects.insert(p, size))
            self->visited_twice++;
        },
        this);
    }
  };

  // What a case holds: its live objects, with their usable sizes, in OS
  // memory so that keeping them allocates nothing.
  struct Held
  {
    static constexpr size_t MAX = size_t(1) << 18;
    void** objects = os_array<void*>(MAX);
    size_t count = 0;

    Held() = default;
    Held(const Held&) = delete;
    Held& operator=(const Held&) = delete;
    ~Held()
    {
      ::munmap(objects, MAX * sizeof(void*));
    }

    void add(void* p)
    {
      REQUIRE(count < MAX);
      objects[count++] = p;
    }
  };

  // An object of a random shape.  Sizes are mostly small, a tenth are
  // between 64 KiB and 3 MiB (large runs), some are aligned, zeroed,
  // resized or of size 0.
  void* allocate_random(std::mt19937_64& rng)
  {
    uint64_t r = rng();
    size_t shape = r % 100;
    size_t size = 0;
    if (shape < 60)
      size = 1 + (r >> 8) % 512;
    else if (shape < 80)
      size = 513 + (r >> 8) % (64 * 1024);
    else if (shape < 90)
      size = 64 * 1024 + 1 + (r >> 8) % (3 * 1024 * 1024);
    void* p = nullptr;
    switch ((r >> 40) % 8)
    {
      case 0:
        p = std::calloc(1, size);
        break;
      case 1:
        p = ::aligned_alloc(size_t(64) << ((r >> 48) % 7), size);
        break;
      case 2:
        // Grown or shrunk: the census must see where it is now.
        p = std::realloc(std::malloc(size / 2 + 1), size + 1);
        break;
      default:
        p = std::malloc(size);
    }
    REQUIRE(p != nullptr);
    if (size != 0)
      std::memset(p, 0xab, std::min<size_t>(size, 64));
    return p;
  }

  // The census after, against the census before and what the case holds:
  // every object it holds is visited, once, with its usable size; nothing
  // else is visited that was not before.
  void check_census(const Census& before, const Held& held)
  {
    Census after;
    CHECK(before.visited_twice == 0);
    CHECK(after.visited_twice == 0);
    PointerTable mine;
    size_t missing = 0, wrong_size = 0, not_unique = 0;
    for (size_t i = 0; i < held.count; i++)
    {
      void* p = held.objects[i];
      size_t usable = ::malloc_usable_size(p);
      if (!mine.insert(p, usable))
        not_unique++;
      int64_t seen = after.objects.size_of(p);
      if (seen < 0)
        missing++;
      else if (size_t(seen) != usable)
        wrong_size++;
    }
    size_t extra = 0;
    after.objects.for_each([&](void* p, size_t) {
      if (mine.size_of(p) < 0 && before.objects.size_of(p) < 0)
        extra++;
    });
    INFO(held.count << " objects held, " << after.objects.count() << " visited");
    CHECK(not_unique == 0);
    CHECK(missing == 0);
    CHECK(wrong_size == 0);
    CHECK(extra == 0);
  }

  void free_random_fraction(Held& held, double fraction, std::mt19937_64& rng)
  {
    std::shuffle(held.objects, held.objects + held.count, rng);
    size_t freed = size_t(double(held.count) * fraction);
    for (size_t i = 0; i < freed; i++)
      std::free(held.objects[i]);
    std::memmove(held.objects, held.objects + freed, (held.count - freed) * sizeof(void*));
    held.count -= freed;
  }
} // namespace

TEST_CASE("census: one thread, objects of every shape, two thirds freed in random order")
{
  for (uint64_t seed : {1u, 2u, 3u})
  {
    INFO("seed " << seed);
    std::mt19937_64 rng(seed);
    Census before;
    Held held;
    for (size_t i = 0; i < 20000; i++)
      held.add(allocate_random(rng));
    free_random_fraction(held, 2.0 / 3.0, rng);
    // Again after the frees have emptied slabs and woken others.
    for (size_t i = 0; i < 5000; i++)
      held.add(allocate_random(rng));
    check_census(before, held);
    free_random_fraction(held, 1.0, rng);
  }
}

TEST_CASE("census: nothing held, nothing new")
{
  Census before;
  Held held;
  std::mt19937_64 rng(7);
  for (size_t i = 0; i < 3000; i++)
    held.add(allocate_random(rng));
  free_random_fraction(held, 1.0, rng);
  check_census(before, held);
}

namespace
{
  // Four threads allocate, pass a share of their objects to the next
  // thread to free (cross-thread frees), free some of their own, keep the
  // rest and exit.  The main thread frees part of what they kept (frees
  // to allocators whose threads have gone) before the census.
  constexpr size_t THREADS = 4, PER_THREAD = 12000;

  struct Shared
  {
    pthread_barrier_t barrier;
    Held passed[THREADS]; // thread i's objects for thread i + 1 to free
    Held kept[THREADS];
    uint64_t seed;
  };

  struct Worker
  {
    Shared* shared;
    size_t index;
  };

  void* work(void* arg)
  {
    auto* w = static_cast<Worker*>(arg);
    Shared& s = *w->shared;
    // Attach this thread's allocator before the census begins.
    std::free(std::malloc(16));
    pthread_barrier_wait(&s.barrier); // the census before is taken
    std::mt19937_64 rng(s.seed * 31 + w->index);
    Held& kept = s.kept[w->index];
    Held& passed = s.passed[w->index];
    for (size_t i = 0; i < PER_THREAD; i++)
    {
      void* p = allocate_random(rng);
      if (rng() % 3 == 0)
        passed.add(p);
      else
        kept.add(p);
    }
    free_random_fraction(kept, 0.5, rng);
    pthread_barrier_wait(&s.barrier);
    Held& mine_to_free = s.passed[(w->index + THREADS - 1) % THREADS];
    std::shuffle(mine_to_free.objects, mine_to_free.objects + mine_to_free.count, rng);
    for (size_t i = 0; i < mine_to_free.count; i++)
      std::free(mine_to_free.objects[i]);
    mine_to_free.count = 0;
    return nullptr;
  }
} // namespace

TEST_CASE("census: four threads, frees across threads, threads gone")
{
  for (uint64_t seed : {11u, 12u})
  {
    INFO("seed " << seed);
    Shared* shared = os_array<Shared>(1);
    new (shared) Shared{};
    shared->seed = seed;
    pthread_barrier_init(&shared->barrier, nullptr, THREADS + 1);
    pthread_t threads[THREADS];
    Worker workers[THREADS];
    for (size_t i = 0; i < THREADS; i++)
    {
      workers[i] = {shared, i};
      REQUIRE(pthread_create(&threads[i], nullptr, work, &workers[i]) == 0);
    }
    std::mt19937_64 rng(seed);
    Held held;
    for (size_t i = 0; i < 2000; i++)
      held.add(allocate_random(rng));
    // Objects the threads attached before this census stay as they are.
    Census before;
    pthread_barrier_wait(&shared->barrier);
    pthread_barrier_wait(&shared->barrier);
    for (pthread_t t : threads)
      pthread_join(t, nullptr);
    for (size_t i = 0; i < held.count; i++)
      std::free(held.objects[i]);
    held.count = 0;
    // Some of what the threads kept is freed here, remotely.
    for (Held& kept : shared->kept)
    {
      free_random_fraction(kept, 0.3, rng);
      for (size_t i = 0; i < kept.count; i++)
        held.add(kept.objects[i]);
    }
    for (size_t i = 0; i < 500; i++)
      held.add(allocate_random(rng));
    check_census(before, held);
    free_random_fraction(held, 1.0, rng);
    pthread_barrier_destroy(&shared->barrier);
    shared->~Shared();
    ::munmap(shared, sizeof(Shared));
  }
}
