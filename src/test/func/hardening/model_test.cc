// A randomized model-based test of the whole malloc family: every block is
// shadowed by what it must be (its size, the alignment asked for, the
// bytes written into it, how it must be freed) and checked against that at
// every step: content intact, alignment kept, usable size at least the
// request, calloc zeroed, realloc preserving the prefix.  Threads pass
// blocks to each other, so frees cross threads.  The seed is printed;
// MODEL_SEED=<seed> replays a run.  Registered unsampled and, in profiling
// builds, with every allocation sampled.
#include "support/alloc_checks.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <malloc.h>
#include <new>
#include <random>
#include <thread>
#include <vector>

using namespace snmalloc_test;

namespace
{
  // How a block was made, which decides how it must be freed.
  enum class Origin
  {
    Malloc, // any of the C functions: free() or sized free
    New,
    NewArray,
    NewAligned,
  };

  struct Block
  {
    void* p = nullptr;
    size_t size = 0;
    size_t align = 1;
    Origin origin = Origin::Malloc;
    uint64_t seed = 0;
  };

  // Catch2's assertions are for one thread: workers count failures here
  // and keep the first one's description; the test checks after joining.
  std::atomic<int> failures{0};
  std::atomic<const char*> first_failure{nullptr};

  bool expect(bool ok, const char* what)
  {
    if (!ok && failures.fetch_add(1) == 0)
      first_failure.store(what);
    return ok;
  }

  void check_no_failures()
  {
    const char* what = first_failure.load();
    INFO("first failure: " << (what != nullptr ? what : "none"));
    CHECK(failures.load() == 0);
  }

  bool check_block(const Block& b)
  {
    return expect(is_aligned(b.p, b.align), "alignment lost") &&
      expect(malloc_usable_size(b.p) >= b.size, "usable size below the request") &&
      expect(stamp_intact(b.p, b.size, b.seed), "content changed");
  }

  class Model
  {
    std::mt19937_64 rng_;
    std::vector<Block> live_;
    uint64_t next_seed_;

    size_t pick_size()
    {
      switch (rng_() % 32)
      {
        case 0:
          return 0;
        case 1:
          return 65537 + rng_() % (1 << 20); // large
        case 2:
        case 3:
          return 1 + rng_() % 65536; // up to the largest small class
        default:
          return 1 + rng_() % 512;
      }
    }

    size_t pick_align()
    {
      return size_t(1) << (rng_() % 14); // 1 B .. 8 KiB
    }

    void keep(void* p, size_t size, size_t align, Origin origin, bool zeroed = false)
    {
      if (!expect(p != nullptr, "allocation failed"))
        return;
      Block b{p, size, align, origin, next_seed_++};
      if (zeroed)
        expect(all_zero(p, size), "calloc memory not zeroed");
      expect(is_aligned(p, align), "allocation not aligned as asked");
      expect(malloc_usable_size(p) >= size, "usable size below the request");
      stamp(p, size, b.seed);
      live_.push_back(b);
    }

    void allocate()
    {
      size_t size = pick_size();
      size_t align = pick_align();
      size_t page = size_t(::sysconf(_SC_PAGESIZE));
      switch (rng_() % 13)
      {
        case 0:
          return keep(std::malloc(size), size, 16, Origin::Malloc);
        case 1:
        {
          size_t n = 1 + rng_() % 8;
          return keep(std::calloc(n, size / n), n * (size / n), 16, Origin::Malloc, true);
        }
        case 2:
          return keep(std::realloc(nullptr, size), size, 16, Origin::Malloc);
        case 3:
        {
          size_t n = 1 + rng_() % 8;
          return keep(::reallocarray(nullptr, n, size / n), n * (size / n), 16, Origin::Malloc);
        }
        case 4:
          return keep(std::aligned_alloc(align, size), size, align, Origin::Malloc);
        case 5:
        {
          void* p = nullptr;
          size_t a = align < sizeof(void*) ? sizeof(void*) : align;
          expect(::posix_memalign(&p, a, size) == 0, "posix_memalign failed");
          return keep(p, size, a, Origin::Malloc);
        }
        case 6:
          return keep(::memalign(align, size), size, align, Origin::Malloc);
        case 7:
          return keep(::valloc(size), size, page, Origin::Malloc);
        case 8:
          return keep(::pvalloc(size), size, page, Origin::Malloc);
        case 9:
          return keep(::operator new(size), size, 16, Origin::New);
        case 10:
          return keep(::operator new[](size), size, 16, Origin::NewArray);
        case 11:
          return keep(
            ::operator new(size, std::align_val_t(align)), size, align, Origin::NewAligned);
        default:
          return keep(::operator new(size, std::nothrow), size, 16, Origin::New);
      }
    }

    void resize()
    {
      Block& b = live_[rng_() % live_.size()];
      if (b.origin != Origin::Malloc)
        return;
      check_block(b);
      size_t size = pick_size();
      if (size == 0)
        size = 1; // realloc(p, 0) frees: covered by release()
      void* q = rng_() % 2 == 0 ? std::realloc(b.p, size) : ::reallocarray(b.p, 1, size);
      if (!expect(q != nullptr, "realloc failed"))
        return;
      size_t kept = size < b.size ? size : b.size;
      expect(stamp_intact(q, kept, b.seed), "realloc lost the content");
      // realloc promises the default alignment only.
      b = Block{q, size, 16, Origin::Malloc, next_seed_++};
      expect(is_aligned(q, 16), "realloc result not aligned");
      expect(malloc_usable_size(q) >= size, "usable size below the request");
      stamp(q, size, b.seed);
    }

  public:
    explicit Model(uint64_t seed) : rng_(seed), next_seed_(seed << 20) {}

    static void release(const Block& b, std::mt19937_64& rng)
    {
      check_block(b);
      switch (b.origin)
      {
        case Origin::Malloc:
          if (rng() % 3 == 0)
            std::free(b.p);
          else if (rng() % 2 == 0)
            expect(std::realloc(b.p, 0) == nullptr, "realloc(p, 0) did not free");
          else
            // A sized free: the aligned form, whose size is checked to be at
            // most the block's (the checks build checks the unaligned form's
            // size exactly against operator new's: a realloc'd or aligned
            // block has another class than its size).
            ::operator delete(b.p, b.size, std::align_val_t(b.align));
          return;
        case Origin::New:
          if (rng() % 2 == 0)
            ::operator delete(b.p, b.size);
          else
            ::operator delete(b.p);
          return;
        case Origin::NewArray:
          ::operator delete[](b.p, b.size);
          return;
        case Origin::NewAligned:
          ::operator delete(b.p, b.size, std::align_val_t(b.align));
          return;
      }
    }

    // One random step; a block handed off (to `out`, if given) leaves the
    // model for another thread to check and free.
    void step(std::vector<Block>* out)
    {
      unsigned op = unsigned(rng_() % 10);
      if (live_.empty() || op < 4)
        return allocate();
      if (op < 6)
        return resize();
      size_t i = rng_() % live_.size();
      Block b = live_[i];
      live_[i] = live_.back();
      live_.pop_back();
      if (out != nullptr && op == 9)
        out->push_back(b);
      else
        release(b, rng_);
    }

    void release_all()
    {
      for (const Block& b : live_)
        release(b, rng_);
      live_.clear();
    }
  };

  uint64_t run_seed()
  {
    if (const char* s = std::getenv("MODEL_SEED"))
      return std::strtoull(s, nullptr, 0);
    return std::random_device{}();
  }
} // namespace

TEST_CASE("malloc family against a shadow model, one thread", "[model]")
{
  uint64_t seed = run_seed();
  std::printf("model single-thread: MODEL_SEED=%llu\n", static_cast<unsigned long long>(seed));
  CAPTURE(seed);
  Model m(seed);
  for (int i = 0; i < 60000; i++)
    m.step(nullptr);
  m.release_all();
  check_no_failures();
}

TEST_CASE("malloc family against a shadow model, threads freeing each other's blocks", "[model]")
{
  uint64_t seed = run_seed();
  std::printf("model threads: MODEL_SEED=%llu\n", static_cast<unsigned long long>(seed));
  CAPTURE(seed);
  constexpr size_t THREADS = 4;
  constexpr int ROUNDS = 10;
  constexpr int STEPS = 5000;
  // Each round every thread steps its model, handing some blocks off; the
  // next round, the next thread checks and frees them.
  std::vector<std::vector<Block>> mailbox(THREADS);
  std::vector<Model> models;
  for (size_t t = 0; t < THREADS; t++)
    models.emplace_back(seed + t);
  for (int round = 0; round < ROUNDS; round++)
  {
    std::vector<std::vector<Block>> sent(THREADS);
    std::vector<std::thread> threads;
    for (size_t t = 0; t < THREADS; t++)
    {
      threads.emplace_back([&, t] {
        std::mt19937_64 rng(seed ^ (uint64_t(round) << 32) ^ t);
        for (const Block& b : mailbox[t])
          Model::release(b, rng);
        for (int i = 0; i < STEPS; i++)
          models[t].step(&sent[t]);
      });
    }
    for (auto& th : threads)
      th.join();
    for (size_t t = 0; t < THREADS; t++)
      mailbox[(t + 1) % THREADS] = std::move(sent[t]);
  }
  std::mt19937_64 rng(seed);
  for (auto& box : mailbox)
    for (const Block& b : box)
      Model::release(b, rng);
  for (auto& m : models)
    m.release_all();
  check_no_failures();
}
