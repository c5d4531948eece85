// Every free the allocator can prove wrong stops the program with one line
// naming the kind and the pointer, then abort() (SIGABRT): never a segfault,
// never a silent corruption.  Each case runs in a forked child.
#include "support/alloc_checks.h"
#include "support/death.h"

#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdlib>
#include <malloc.h>
#include <snmalloc/snmalloc.h>
#include <thread>
#include <vector>

using namespace snmalloc_test;

namespace
{
  constexpr size_t LARGE = 256 * 1024;
} // namespace

TEST_CASE("free of a stack address is an invalid free", "[bad-free]")
{
  int local = 0;
  void* p = hide(&local);
  check_dies([p] { std::free(p); }, "invalid free of", p);
}

TEST_CASE("free of a far pointer is an invalid free", "[bad-free]")
{
  void* p = hide(reinterpret_cast<void*>(uintptr_t(0x10000)));
  check_dies([p] { std::free(p); }, "invalid free of", p);
}

TEST_CASE("interior pointer into a large block", "[bad-free]")
{
  void* block = std::malloc(LARGE);
  void* p = offset(block, 64);
  check_dies([p] { std::free(p); }, "interior pointer", p);
  std::free(block);
}

TEST_CASE("double free of a large block", "[bad-free]")
{
  void* block = std::malloc(LARGE);
  check_dies(
    [block] {
      std::free(block);
      std::free(hide(block));
    },
    "invalid free of",
    block);
  std::free(block);
}

TEST_CASE("a thread with no allocator frees the tail of a large block", "[bad-free]")
{
  // The tail's chunks have owner 0, as a thread with no allocator once
  // had: that took the fast path with a null slab and crashed.
  void* block = std::malloc(LARGE);
  void* tail = offset(block, LARGE / 2);
  check_dies(
    [tail] { std::thread([tail] { std::free(tail); }).join(); },
    "invalid free of",
    tail);
  std::free(block);
}

TEST_CASE("a thread with no allocator frees a freed large block", "[bad-free]")
{
  void* block = std::malloc(LARGE);
  check_dies(
    [block] {
      std::free(block);
      std::thread([block] { std::free(hide(block)); }).join();
    },
    "invalid free of",
    block);
  std::free(block);
}

TEST_CASE("unaligned pointer into a small object freed by another thread", "[bad-free]")
{
  void* object = std::malloc(48);
  void* p = offset(object, 8);
  check_dies([p] { std::thread([p] { std::free(p); }).join(); }, "interior pointer", p);
  std::free(object);
}

TEST_CASE("unaligned pointer freed by its own thread is caught at the free", "[bad-free]")
{
  // The free fast path's object-start check rejects a pointer that is not
  // 16-byte aligned.  The child must stop at the free, before the exit.
  for (size_t size : {16, 48, 4096})
  {
    for (size_t by : {1, 8, 15})
    {
      CAPTURE(size, by);
      check_dies_naming(
        [size, by](auto tell) {
          void* p = offset(std::malloc(size), by);
          tell(p);
          std::free(p);
          ::_exit(0);
        },
        "interior pointer");
    }
  }
}

TEST_CASE("interior pointer at an object size boundary of another class", "[bad-free]")
{
  // 96 bytes into a 192-byte object is a multiple of 16 and of 32, not of
  // the object's size.
  void* object = std::malloc(192);
  void* p = offset(object, 96);
  check_dies([p] { std::thread([p] { std::free(p); }).join(); }, "interior pointer", p);
  std::free(object);
}

namespace
{
  // Three slabs' worth of the smallest class (16-byte objects: 4,096 to a
  // 64 KiB slab, 1,024 to the checks build's 16 KiB one), so that the
  // middle object's slab holds only these.
  constexpr size_t MANY = 3 * snmalloc::MAX_CAPACITY;

  // Allocate many objects of `size` and free them all, the one in the
  // middle twice (by `free_twice`), then allocate as many again: the slab
  // holding it wakes, is released or is refilled from on the way, and each
  // of those checks its free list.  The middle one's slab holds only these
  // objects (the first ones may share a slab with older live objects).
  template<typename Tell, typename FreeTwice>
  void double_free_then_churn(Tell tell, size_t size, FreeTwice free_twice)
  {
    std::vector<void*> v(MANY);
    for (auto& p : v)
      p = std::malloc(size);
    void* twice = v[MANY / 2];
    tell(twice);
    free_twice(twice);
    for (size_t i = 0; i < MANY; i++)
    {
      if (i != MANY / 2)
        std::free(v[i]);
    }
    for (auto& p : v)
      p = std::malloc(size);
  }
} // namespace

TEST_CASE("double free of a small object", "[bad-free]")
{
  for (size_t size : {16, 48, 4096})
  {
    CAPTURE(size);
    check_dies_naming(
      [size](auto tell) {
        double_free_then_churn(tell, size, [](void* p) {
          std::free(p);
          std::free(hide(p));
        });
      },
      "double free of");
  }
}

TEST_CASE("a small object freed twice with frees of its neighbours between is caught", "[bad-free]")
{
  // Its slab's list then holds it twice, some pushes apart, and its count
  // says one more object free than is: caught when the slab is released
  // or taken again, in whichever order the program frees.  If its first
  // free emptied its slab and the slab went back, the second is a free of
  // memory not allocated.
  enum class Order
  {
    Ascending,
    Descending,
    Shuffled
  };
  for (size_t size : {16, 48, 256, 4096})
  {
    for (Order order : {Order::Ascending, Order::Descending, Order::Shuffled})
    {
      for (size_t between : {1, 3})
      {
        CAPTURE(size, int(order), between);
        auto [end, told] = run_telling([=](auto tell) {
          std::vector<void*> v(MANY);
          for (auto& p : v)
            p = std::malloc(size);
          std::vector<size_t> frees(MANY);
          for (size_t i = 0; i < MANY; i++)
            frees[i] = order == Order::Descending ? MANY - 1 - i : i;
          uint64_t state = 0x9e3779b97f4a7c15 * (size + between);
          for (size_t i = MANY; order == Order::Shuffled && i > 1; i--)
          {
            state = state * 6364136223846793005 + 1442695040888963407;
            std::swap(frees[i - 1], frees[(state >> 33) % i]);
          }
          void* twice = v[MANY / 2];
          tell(twice);
          // Freed again after `between` frees of objects within a few of
          // it, which share its slab (at the end if fewer come after it).
          size_t pending = 0;
          for (size_t i : frees)
          {
            std::free(v[i]);
            size_t distance = i > MANY / 2 ? i - MANY / 2 : MANY / 2 - i;
            if (i == MANY / 2)
              pending = between;
            else if (pending != 0 && distance <= 8 && --pending == 0)
              std::free(hide(twice));
          }
          if (pending != 0)
            std::free(hide(twice));
          for (auto& p : v)
            p = std::malloc(size);
          for (auto& p : v)
            p = std::malloc(size);
        });
        CHECK(end.exit_code == 0);
        CHECK(end.signal == SIGABRT);
        CHECK(
          (end.stderr_text == fatal_line("double free of", told) ||
           end.stderr_text == fatal_line("invalid free of", told)));
      }
    }
  }
}

TEST_CASE("a small object freed twice in a row is caught at the second free", "[bad-free]")
{
  // The free fast path's one compare: the object is already its slab's
  // last freed.  The child must stop at the second free, before the exit.
  for (size_t size : {16, 48, 4096})
  {
    CAPTURE(size);
    void* keep = std::malloc(size); // the slab stays after p's free
    check_dies_naming(
      [size](auto tell) {
        void* p = std::malloc(size);
        tell(p);
        std::free(p);
        std::free(hide(p));
        ::_exit(0);
      },
      "double free of");
    std::free(keep);
  }
}

TEST_CASE("double free of a small object by two other threads", "[bad-free]")
{
  for (size_t size : {16, 4096})
  {
    CAPTURE(size);
    check_dies_naming(
      [size](auto tell) {
        double_free_then_churn(tell, size, [](void* p) {
          std::thread([p] { std::free(p); }).join();
          std::thread([p] { std::free(hide(p)); }).join();
        });
      },
      "double free of");
  }
}

namespace
{
  // Objects of `size` freed by another thread reach their owner as one
  // message, chained through their first words, which the owner walks at
  // a later refill.  `overwrite` writes after free into one of them (its
  // link), given it and a live object of the same size; then the owner
  // allocates until it has taken the message.
  template<typename Tell, typename Overwrite>
  void overwrite_link_in_message(Tell tell, size_t size, Overwrite overwrite)
  {
    std::vector<void*> freed(64);
    for (auto& p : freed)
      p = std::malloc(size);
    void* live = std::malloc(size);
    std::thread([&freed] {
      for (void* p : freed)
        std::free(p);
    }).join();
    overwrite(tell, freed[freed.size() / 3], live);
    std::vector<void*> more;
    for (int i = 0; i < 100000; i++)
      more.push_back(std::malloc(size));
    ::_exit(0);
  }

  // Sampled objects (every one, in the run with SNMALLOC_PROFILE=rate=1)
  // are the profiler's, freed by it, never in a message.
  bool sampled_at(size_t size)
  {
    void* p = std::malloc(size);
    bool sampled = snmalloc::is_tag(snmalloc::pagemap.entry_of(p).get_owner());
    std::free(p);
    return sampled;
  }
} // namespace

TEST_CASE("a link overwritten in a message of remote frees stops its owner", "[bad-free]")
{
  for (size_t size : {16, 48, 4096})
  {
    CAPTURE(size);
    if (sampled_at(size))
      continue;
    check_dies_naming(
      [size](auto tell) {
        overwrite_link_in_message(tell, size, [](auto tell_, void* victim, void*) {
          tell_(victim);
          *static_cast<uintptr_t*>(hide(victim)) = 0x4141414141414140;
        });
      },
      "free list corrupted (write after free?) at",
      "");
  }
}

TEST_CASE("a link in a message overwritten to point inside a live object", "[bad-free]")
{
  // Followed, the owner would push the interior pointer on a slab's list
  // and later hand out an object overlapping the live one.  The checks
  // build's links are encoded: the plain pointer written decodes to
  // nowhere.
  for (size_t size : {48, 4096})
  {
    CAPTURE(size);
    if (sampled_at(size))
      continue;
    check_dies_naming(
      [size](auto tell) {
        overwrite_link_in_message(tell, size, [](auto tell_, void* victim, void* live) {
          void* inside = static_cast<char*>(live) + 16;
          tell_(snmalloc::config::checks ? victim : inside);
          *static_cast<void**>(hide(victim)) = inside;
        });
      },
      snmalloc::config::checks ? "free list corrupted (write after free?) at" : "interior pointer",
      snmalloc::config::checks ? "" : "free(): ");
  }
}

TEST_CASE("interior pointer freed by its own thread", "[bad-free]")
{
  // Not seen on the fast path; seen when the object's slab is released
  // (not kept as its class's last: the last slab stays partly allocated).
  check_dies_naming(
    [](auto tell) {
      std::vector<void*> v(MANY);
      for (auto& p : v)
        p = std::malloc(3072);
      void* interior = offset(v[MANY / 2], 1024);
      tell(interior);
      for (size_t i = MANY; i-- > 0;)
        std::free(i == MANY / 2 ? interior : v[i]);
      for (auto& p : v)
        p = std::malloc(3072);
    },
    "interior pointer");
}

TEST_CASE("abort, not a trap, ends the program on a fatal error", "[bad-free]")
{
  ChildEnd end = run_in_child([] { snmalloc::report_fatal("test message"); });
  CHECK(end.signal == SIGABRT);
  CHECK(end.stderr_text == "snmalloc: fatal: test message\n");
}

TEST_CASE("sized delete with a size larger than the object", "[bad-free]")
{
  // Checked off the fast path: a large block, and a small one freed by a
  // thread that does not own it.
  void* large = ::operator new(LARGE);
  check_dies(
    [large] { ::operator delete(large, 2 * LARGE); }, "size mismatch on sized free of", large);
  ::operator delete(large, LARGE);
  void* small = ::operator new(48);
  check_dies(
    [small] { std::thread([small] { ::operator delete(small, 4096); }).join(); },
    "size mismatch on sized free of",
    small);
  ::operator delete(small, 48);
}

TEST_CASE("sized delete with the size allocated is accepted", "[bad-free]")
{
  for (size_t size : {size_t(0), size_t(1), size_t(40), size_t(48), size_t(70000), LARGE})
  {
    CAPTURE(size);
    void* p = ::operator new(size);
    std::thread([p, size] { ::operator delete(p, size); }).join();
    void* q = ::operator new(size, std::align_val_t(4096));
    std::thread([q, size] { ::operator delete(q, size, std::align_val_t(4096)); }).join();
    void* r = ::operator new[](size);
    ::operator delete[](r, size);
  }
}

TEST_CASE("sized delete with a size of another class, by the owning thread", "[bad-free]")
{
  // operator delete(p, size) checks the size's class on the fast path: a
  // smaller size of another class is as wrong as a larger one.
  for (size_t size : {size_t(48), size_t(4096)})
  {
    CAPTURE(size);
    void* keep = ::operator new(size); // the slab stays after p's free
    for (size_t wrong : {size / 2, size + 1, size * 4 + 4096})
    {
      CAPTURE(wrong);
      check_dies_naming(
        [size, wrong](auto tell) {
          void* p = ::operator new(size);
          tell(p);
          ::operator delete(hide(p), wrong);
          ::_exit(0);
        },
        "size mismatch on sized free of");
    }
    ::operator delete(keep, size);
  }
  void* large = ::operator new(LARGE);
  check_dies(
    [large] { ::operator delete(large, LARGE / 2); }, "size mismatch on sized free of", large);
  ::operator delete(large, LARGE);
}

TEST_CASE("sized delete with a size of another class, by another thread", "[bad-free]")
{
  // Another thread's delete takes the remote free only when the size's
  // class is the object's: a smaller one of another class is named too,
  // the next class's smallest and the class below's largest included.
  // The thread allocates first, so that it has an allocator of its own
  // (one without takes another path).
  for (size_t size : {size_t(48), size_t(4096), size_t(20480)})
  {
    CAPTURE(size);
    void* p = ::operator new(size);
    size_t below = snmalloc::sizeclass_to_size(snmalloc::size_to_sizeclass(size) - 1);
    for (size_t wrong : {size / 2, below, size + 1, size * 2})
    {
      CAPTURE(wrong);
      check_dies(
        [p, wrong] {
          std::thread([p, wrong] {
            std::free(std::malloc(1));
            ::operator delete(p, wrong);
          }).join();
        },
        "size mismatch on sized free of",
        p);
    }
    std::thread([p, size] {
      std::free(std::malloc(1));
      ::operator delete(p, size);
    }).join();
  }
}

TEST_CASE("free_sized with a size larger than the object", "[bad-free]")
{
  // Off the fast path, as sized delete: a large block, and small ones
  // freed by a thread that does not own them.
  void* large = std::malloc(LARGE + 100);
  check_dies([large] { free_sized(large, 2 * LARGE); }, "size mismatch on sized free of", large);
  free_sized(large, LARGE + 100);
  for (size_t size : {size_t(24), size_t(1000), size_t(20000)})
  {
    CAPTURE(size);
    void* small = std::malloc(size);
    size_t usable = malloc_usable_size(small);
    for (size_t wrong : {usable + 1, 4 * size})
    {
      CAPTURE(wrong);
      check_dies(
        [small, wrong] {
          std::thread([small, wrong] {
            std::free(std::malloc(1));
            free_sized(small, wrong);
          }).join();
        },
        "size mismatch on sized free of",
        small);
    }
    // The whole object is no error (realloc may have shrunk it in place).
    std::thread([small, usable] {
      std::free(std::malloc(1));
      free_sized(small, usable);
    }).join();
  }
}

TEST_CASE("free_aligned_sized of a pointer not at its alignment", "[bad-free]")
{
  // A pointer not from aligned_alloc(align, ...): whatever its object,
  // the alignment it is freed with says it is another.  So is an
  // alignment that is not a power of two.
  void* small = std::malloc(48);
  size_t align = 64;
  while (reinterpret_cast<uintptr_t>(small) % align == 0)
    align *= 2;
  check_dies(
    [small, align] { free_aligned_sized(small, align, 48); },
    "alignment mismatch on free_aligned_sized of",
    small);
  void* large = aligned_alloc(4096, LARGE);
  void* inside = offset(large, 4096 + 64);
  check_dies(
    [inside] { free_aligned_sized(inside, 4096, LARGE); },
    "alignment mismatch on free_aligned_sized of",
    inside);
  check_dies(
    [large] { free_aligned_sized(large, 4096 + 2048, LARGE); },
    "alignment mismatch on free_aligned_sized of",
    large);
  free_aligned_sized(large, 4096, LARGE);
  free_aligned_sized(small, 16, 48);
}

TEST_CASE("sized delete at an interior pointer names the interior pointer", "[bad-free]")
{
  // delete of a new[] array of a type with a destructor: the array's
  // count is in front, so the pointer is 8 bytes in, with the size of one
  // element.  Sampled too: its record, found from its start, is not read
  // for another pointer.
  void* array = ::operator new[](4096 + 8);
  void* p = offset(array, 8);
  check_dies([p] { ::operator delete(p, 8); }, "interior pointer", p);
  ::operator delete[](array, 4096 + 8);
}

namespace
{
  struct Base
  {
    uint64_t word = 1;
    virtual ~Base() = default;
  };

  // Of another sizeclass than Base: deleting it through a Base pointer
  // passes the dynamic type's size, which is right.
  struct Derived : Base
  {
    uint64_t more[40] = {};
  };

  struct WithDestructor
  {
    uint64_t word = 2;
    ~WithDestructor()
    {
      word = 0;
    }
  };
} // namespace

TEST_CASE("sized deletes a correct program makes are accepted", "[bad-free]")
{
  // Every size up to past the largest class, freed by the thread that
  // allocated it (the fast path's check) and by another thread.
  for (size_t size = 0; size <= 70000; size += size < 1024 ? 1 : 509)
  {
    void* p = ::operator new(size);
    ::operator delete(p, size);
    void* q = ::operator new[](size);
    ::operator delete[](q, size);
  }
  std::vector<Base*> objects;
  for (int i = 0; i < 1000; i++)
    objects.push_back(i % 2 == 0 ? new Base : new Derived);
  for (Base* b : objects)
    delete b;
  volatile size_t count = 100;
  auto* array = new WithDestructor[count];
  delete[] array;
  std::vector<std::vector<int>> nested(100);
  for (auto& v : nested)
    for (int i = 0; i < 1000; i++)
      v.push_back(i);
  CHECK(nested[99][999] == 999);
}

TEST_CASE("a zero-size allocation faults on any access", "[bad-free]")
{
  // Its slot is inaccessible (mem/zero_size.h): a read or a write of one
  // byte ends the program with SIGSEGV, at the access.  (The checks build
  // gives 16-byte objects, whose copies it bounds.)
  if (snmalloc::config::checks)
    return;
  for (bool write : {false, true})
  {
    CAPTURE(write);
    ChildEnd end = run_in_child([write] {
      auto* p = static_cast<volatile char*>(hide(std::malloc(0)));
      if (write)
        p[0] = 1;
      else
        (void)p[0];
      ::_exit(0);
    });
    CHECK(end.signal == SIGSEGV);
  }
  void* p = ::operator new(0);
  ChildEnd end = run_in_child([p] {
    (void)*static_cast<volatile char*>(hide(p));
    ::_exit(0);
  });
  CHECK(end.signal == SIGSEGV);
  ::operator delete(p);
}

TEST_CASE("a zero-size allocation freed twice", "[bad-free]")
{
  if (snmalloc::config::checks)
    return;
  void* keep = std::malloc(0);
  check_dies_naming(
    [](auto tell) {
      void* p = std::malloc(0);
      void* q = std::malloc(0); // p's slot is not the only one out
      tell(p);
      std::free(p);
      std::free(hide(p));
      std::free(q);
      ::_exit(0);
    },
    "double free of");
  std::free(keep);
}
