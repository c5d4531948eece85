// One small program per heap bug: `heap_bugs <bug> <size>` commits the bug
// on a block of `size` bytes, then does a little ordinary work and prints
// "reached the end".  An allocator "catches" the bug when the program stops
// before that line.  The bugs that reveal or reuse memory (old data in a
// freed or fresh block, an address handed out again at once, two live
// blocks overlapping) are looked for by the program itself, which stops
// with a line saying what it did not find when the allocator prevented
// them.  `heap_bugs --list` prints each bug, its kind and the sizes it is
// run at.  Built at -O0 with -fno-builtin so the compiler neither removes
// nor diagnoses the bugs.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <thread>

namespace
{
  using Bug = void (*)(size_t);

  char* block(size_t size)
  {
    return static_cast<char*>(std::malloc(size));
  }

  // Ordinary allocation traffic after the bug, of the bug's size and others.
  void churn(size_t size)
  {
    void* keep[64];
    for (int round = 0; round < 4; round++)
    {
      for (int i = 0; i < 64; i++)
      {
        keep[i] = std::malloc(i % 2 == 0 ? size : 16 + size_t(i) * 24);
        std::memset(keep[i], i, i % 2 == 0 ? size : 16);
      }
      for (int i = 0; i < 64; i++)
        std::free(keep[i]);
    }
  }

  void double_free_immediate(size_t size)
  {
    char* p = block(size);
    std::free(p);
    std::free(p);
  }

  void double_free_delayed(size_t size)
  {
    char* p = block(size);
    std::free(p);
    churn(size);
    std::free(p);
  }

  void double_free_interleaved(size_t size)
  {
    char* p = block(size);
    char* q = block(size);
    std::free(p);
    std::free(q);
    std::free(p);
  }

  void double_free_after_reuse(size_t size)
  {
    char* p = block(size);
    std::free(p);
    char* q = block(size);
    std::memset(q, 1, size);
    std::free(p);
    std::free(q);
  }

  void double_free_other_thread(size_t size)
  {
    char* p = block(size);
    std::thread([p] { std::free(p); }).join();
    std::free(p);
  }

  void double_delete(size_t size)
  {
    void* p = ::operator new(size);
    ::operator delete(p);
    ::operator delete(p);
  }

  void realloc_after_free(size_t size)
  {
    char* p = block(size);
    std::free(p);
    char* q = static_cast<char*>(std::realloc(p, size + size / 2));
    std::memset(q, 1, size);
    std::free(q);
  }

  void free_stack(size_t)
  {
    char local[64];
    std::memset(local, 0, sizeof(local));
    std::free(local);
  }

  void free_unaligned(size_t size)
  {
    char* p = block(size);
    std::free(p + 1);
  }

  void free_interior(size_t size)
  {
    char* p = block(size);
    std::free(p + (size / 2 < 16 ? 16 : size / 2 / 16 * 16));
  }

  void free_far(size_t size)
  {
    char* p = block(size);
    std::free(p + (size_t(1) << 34));
  }

  void free_global(size_t)
  {
    static char global[64];
    std::free(global);
  }

  // Direct writes, byte by byte (volatile: no memset for the compiler to
  // make of them), past the end or before the start of a block.
  void store(char* at, size_t by)
  {
    volatile char* v = at;
    for (size_t i = 0; i < by; i++)
      v[i] = 0x41;
  }

  void overflow_by(size_t size, size_t by)
  {
    char* p = block(size);
    store(p + size, by);
    std::free(p);
    churn(size);
  }

  void overflow_1(size_t size)
  {
    overflow_by(size, 1);
  }

  void overflow_32(size_t size)
  {
    overflow_by(size, 32);
  }

  void overflow_1mib(size_t size)
  {
    overflow_by(size, size_t(1) << 20);
  }

  void underflow_by(size_t size, size_t by)
  {
    char* p = block(size);
    store(p - by, by);
    std::free(p);
    churn(size);
  }

  void underflow_1(size_t size)
  {
    underflow_by(size, 1);
  }

  void underflow_32(size_t size)
  {
    underflow_by(size, 32);
  }

  void underflow_1mib(size_t size)
  {
    underflow_by(size, size_t(1) << 20);
  }

  void memcpy_overflow_by(size_t size, size_t by)
  {
    char* p = block(size);
    char* source = static_cast<char*>(std::calloc(1, size + by));
    std::memcpy(p, source, size + by);
    std::free(source);
    std::free(p);
    churn(size);
  }

  void memcpy_overflow_1(size_t size)
  {
    memcpy_overflow_by(size, 1);
  }

  void memcpy_overflow_32(size_t size)
  {
    memcpy_overflow_by(size, 32);
  }

  void memcpy_overflow_1mib(size_t size)
  {
    memcpy_overflow_by(size, size_t(1) << 20);
  }

  // `length` bytes copied to `by` bytes before the block: an underflow
  // when `length` is `by`; when it is the block's size, a copy whose
  // destination starts before the block and ends inside it, as a length
  // computed from the wrong start makes.
  void memcpy_before(size_t size, size_t by, size_t length)
  {
    char* p = block(size);
    char* source = static_cast<char*>(std::calloc(1, length));
    std::memcpy(p - by, source, length);
    std::free(source);
    std::free(p);
    churn(size);
  }

  void memcpy_underflow_by(size_t size, size_t by)
  {
    memcpy_before(size, by, by);
  }

  void memcpy_underflow_1(size_t size)
  {
    memcpy_underflow_by(size, 1);
  }

  void memcpy_underflow_32(size_t size)
  {
    memcpy_underflow_by(size, 32);
  }

  void memcpy_underflow_1mib(size_t size)
  {
    memcpy_underflow_by(size, size_t(1) << 20);
  }

  void memmove_overflow_32(size_t size)
  {
    char* p = block(size + 32);
    char* q = block(size);
    std::memmove(q, p, size + 32);
    std::free(q);
    std::free(p);
    churn(size);
  }

  void memset_overflow_1(size_t size)
  {
    char* p = block(size);
    std::memset(p, 0, size + 1);
    std::free(p);
    churn(size);
  }

  void strcpy_overflow(size_t size)
  {
    char* p = block(size);
    std::string s(size + 8, 'x');
    std::strcpy(p, s.c_str());
    std::free(p);
    churn(size);
  }

  void strcat_overflow(size_t size)
  {
    char* p = block(size);
    std::memset(p, 'y', size / 2);
    p[size / 2] = '\0';
    std::string s(size - size / 2, 'x');
    std::strcat(p, s.c_str());
    std::free(p);
    churn(size);
  }

  void write_after_free(size_t size)
  {
    char* p = block(size);
    std::free(p);
    std::memset(p, 0x41, size < 64 ? size : 64);
    churn(size);
  }

  void write_after_free_first_word(size_t size)
  {
    char* p = block(size);
    std::free(p);
    *reinterpret_cast<uintptr_t*>(p) = 0x4141414141414141;
    churn(size);
  }

  void memcpy_after_free(size_t size)
  {
    char* p = block(size);
    char source[64] = {};
    std::free(p);
    std::memcpy(p, source, size < 64 ? size : 64);
    churn(size);
  }

  // The program looked for the bug's effect and did not find it: the
  // allocator prevented it, which counts as caught.
  [[noreturn]] void prevented(const char* what)
  {
    std::printf("prevented: %s\n", what);
    std::exit(3);
  }

  void memcpy_start_before_1(size_t size)
  {
    memcpy_before(size, 1, size);
  }

  void memcpy_start_before_32(size_t size)
  {
    memcpy_before(size, 32, size);
  }

  // One byte changed 1 MiB past the end of the block: memory the allocator
  // may have reserved and not handed out.
  void far_write_1mib(size_t size)
  {
    char* p = block(size);
    volatile char* far = p + size + (size_t(1) << 20);
    *far ^= 0x41;
    std::free(p);
    churn(size);
  }

  // Direct stores through the pointer once the block is freed (not memset,
  // which a checking allocator may check).
  void write_after_free_direct(size_t size)
  {
    char* p = block(size);
    std::free(p);
    store(p, size < 64 ? size : 64);
    churn(size);
  }

  // The same after a block of the same size was allocated again (often at
  // the freed address, when the stores land in the new block unseen).
  void write_after_free_reused(size_t size)
  {
    char* p = block(size);
    std::free(p);
    char* q = block(size);
    std::memset(q, 1, size);
    store(p, size < 64 ? size : 64);
    std::free(q);
    churn(size);
  }

  // Does the block hold an aligned word of eight bytes of one value: of
  // `fill`, or when that is 0 of any nonzero value?  (What a program filled
  // it with; a link or a mark an allocator keeps in a freed block is not
  // such a word but by a chance of 2^-56.)
  bool holds_fill(const volatile char* p, size_t size, char fill = 0)
  {
    for (size_t i = 0; i + 8 <= size; i += 8)
    {
      bool same = fill == 0 ? p[i] != 0 : p[i] == fill;
      for (size_t j = 1; j < 8 && same; j++)
        same = p[i + j] == p[i];
      if (same)
        return true;
    }
    return false;
  }

  // Reads the freed block: does it still show what was written to it?
  void read_after_free(size_t size)
  {
    char* p = block(size);
    std::memset(p, 0x5a, size);
    std::free(p);
    if (!holds_fill(p, size, 0x5a))
      prevented("the freed block shows none of its data");
    churn(size);
  }

  // 4,096 blocks each filled with one byte value from 1 to 255, all freed;
  // then fresh blocks of the size must not show that data.  (A fill the
  // allocator put there itself reads as old data too: the program cannot
  // tell the two apart.)
  void stale_data_after_4096(size_t size)
  {
    constexpr size_t filled = 4096;
    constexpr size_t fresh = 64;
    static char* blocks[filled];
    for (size_t i = 0; i < filled; i++)
    {
      blocks[i] = block(size);
      std::memset(blocks[i], int(1 + i % 255), size);
    }
    for (size_t i = 0; i < filled; i++)
      std::free(blocks[i]);
    size_t stale = 0;
    for (size_t i = 0; i < fresh; i++)
    {
      blocks[i] = block(size);
      stale += holds_fill(blocks[i], size);
    }
    for (size_t i = 0; i < fresh; i++)
      std::free(blocks[i]);
    if (stale == 0)
      prevented("no fresh block shows the freed blocks' data");
    std::printf("%zu of %zu fresh blocks show old data\n", stale, fresh);
  }

  // A block freed and one of its size allocated at once: the same address
  // again lets a stale pointer write into the new block.
  void reuse_at_once(size_t size)
  {
    char* p = block(size);
    std::memset(p, 1, size);
    std::free(p);
    char* q = block(size);
    if (q != p)
      prevented("the fresh block is at another address");
    std::free(q);
  }

  // free(p + 16) of a live block among others of its size, which are then
  // freed (so that their slabs are used again), then blocks of the size
  // allocated until one overlaps the live block: the interior pointer was
  // taken as a free object.  Caught when the program stops first.  At most
  // 4,096 blocks, 64 MiB, each time.
  void interior_free_then_malloc(size_t size)
  {
    static char* blocks[4096];
    size_t count = (size_t(64) << 20) / size < 4096 ? (size_t(64) << 20) / size : 4096;
    for (size_t i = 0; i < count; i++)
      blocks[i] = block(size);
    char* p = blocks[count / 2];
    std::memset(p, 0x41, size);
    std::free(p + 16);
    for (size_t i = 0; i < count; i++)
    {
      if (i != count / 2)
        std::free(blocks[i]);
    }
    for (size_t i = 0; i < count; i++)
    {
      char* q = block(size);
      if (q < p + size && p < q + size)
      {
        std::printf("block %zu at %p overlaps the live block at %p\n", i + 1, static_cast<void*>(q), static_cast<void*>(p));
        return;
      }
    }
    prevented("no block overlapped the live one");
  }

  // With a destructor, new[] stores the count in front of the elements,
  // so delete and delete[] disagree about where the block starts.
  struct Counted
  {
    char bytes[8];
    ~Counted()
    {
      bytes[0] = 0;
    }
  };

  void delete_array_with_delete(size_t size)
  {
    Counted* p = new Counted[size / sizeof(Counted)];
    delete p;
  }

  void delete_with_delete_array(size_t size)
  {
    Counted* p = static_cast<Counted*>(::operator new(size));
    new (p) Counted();
    delete[] p;
  }

  void sized_delete_wrong_size(size_t size)
  {
    void* p = ::operator new(size);
    ::operator delete(p, size * 4 + 4096);
  }

  void sized_delete_smaller(size_t size)
  {
    void* p = ::operator new(size);
    ::operator delete(p, size / 2);
  }

  void delete_malloc(size_t size)
  {
    char* p = block(size);
    ::operator delete(p);
  }

  void free_new(size_t size)
  {
    char* p = new char[size];
    std::free(p);
  }

  void zero_size_write(size_t)
  {
    char* p = block(0);
    std::memset(p, 0x41, 32);
    std::free(p);
    churn(16);
  }

  void zero_size_read(size_t)
  {
    char* p = block(0);
    char copy[32];
    std::memcpy(copy, p, sizeof(copy));
    std::free(p);
    churn(16);
  }

  // Kinds, for the counts split by kind (bug_suite.sh).
  constexpr const char* DOUBLE_FREE = "double-free";
  constexpr const char* BAD_FREE = "bad-free";
  constexpr const char* MISMATCH = "mismatched-free";
  constexpr const char* DIRECT_OOB = "direct-out-of-bounds";
  constexpr const char* FAR_WRITE = "far-write";
  constexpr const char* COPY_OOB = "copy-out-of-bounds";
  constexpr const char* COPY_BEFORE = "copy-starts-before";
  constexpr const char* USE_AFTER_FREE = "use-after-free";
  constexpr const char* OLD_DATA = "old-data-visible";
  constexpr const char* REUSE = "immediate-reuse";
  constexpr const char* OVERLAP = "interior-free-overlap";
  constexpr const char* ZERO_SIZE = "zero-size";

  constexpr const char* EVERY_SIZE = "8 4096 262144";

  struct Entry
  {
    const char* name;
    const char* kind;
    Bug run;
    const char* sizes = EVERY_SIZE;
  };

  const Entry bugs[] = {
    {"double-free-immediate", DOUBLE_FREE, double_free_immediate},
    {"double-free-delayed", DOUBLE_FREE, double_free_delayed},
    {"double-free-interleaved", DOUBLE_FREE, double_free_interleaved},
    {"double-free-after-reuse", DOUBLE_FREE, double_free_after_reuse},
    {"double-free-other-thread", DOUBLE_FREE, double_free_other_thread},
    {"double-delete", DOUBLE_FREE, double_delete},
    {"realloc-after-free", DOUBLE_FREE, realloc_after_free},
    {"free-stack", BAD_FREE, free_stack},
    {"free-global", BAD_FREE, free_global},
    {"free-unaligned", BAD_FREE, free_unaligned},
    {"free-interior", BAD_FREE, free_interior},
    {"free-far", BAD_FREE, free_far},
    {"overflow-1", DIRECT_OOB, overflow_1},
    {"overflow-32", DIRECT_OOB, overflow_32},
    {"overflow-1mib", DIRECT_OOB, overflow_1mib},
    {"underflow-1", DIRECT_OOB, underflow_1},
    {"underflow-32", DIRECT_OOB, underflow_32},
    {"underflow-1mib", DIRECT_OOB, underflow_1mib},
    {"far-write-1mib", FAR_WRITE, far_write_1mib},
    {"memcpy-overflow-1", COPY_OOB, memcpy_overflow_1},
    {"memcpy-overflow-32", COPY_OOB, memcpy_overflow_32},
    {"memcpy-overflow-1mib", COPY_OOB, memcpy_overflow_1mib},
    {"memcpy-underflow-1", COPY_OOB, memcpy_underflow_1},
    {"memcpy-underflow-32", COPY_OOB, memcpy_underflow_32},
    {"memcpy-underflow-1mib", COPY_OOB, memcpy_underflow_1mib},
    {"memset-overflow-1", COPY_OOB, memset_overflow_1},
    {"memmove-overflow-32", COPY_OOB, memmove_overflow_32},
    {"strcpy-overflow", COPY_OOB, strcpy_overflow},
    {"strcat-overflow", COPY_OOB, strcat_overflow},
    {"memcpy-start-before-1", COPY_BEFORE, memcpy_start_before_1},
    {"memcpy-start-before-32", COPY_BEFORE, memcpy_start_before_32},
    {"write-after-free", USE_AFTER_FREE, write_after_free},
    {"write-after-free-first-word", USE_AFTER_FREE, write_after_free_first_word},
    {"write-after-free-direct", USE_AFTER_FREE, write_after_free_direct},
    {"write-after-free-reused", USE_AFTER_FREE, write_after_free_reused},
    {"memcpy-after-free", USE_AFTER_FREE, memcpy_after_free},
    {"read-after-free", OLD_DATA, read_after_free},
    {"stale-data-after-4096", OLD_DATA, stale_data_after_4096},
    {"reuse-at-once", REUSE, reuse_at_once},
    // An offset of 16 in an 8-byte block is the next block: 256 bytes, as
    // the case was found, instead.
    {"interior-free-then-malloc", OVERLAP, interior_free_then_malloc, "256 4096 262144"},
    {"delete-array-with-delete", MISMATCH, delete_array_with_delete},
    {"delete-with-delete-array", MISMATCH, delete_with_delete_array},
    {"sized-delete-wrong-size", MISMATCH, sized_delete_wrong_size},
    {"sized-delete-smaller", MISMATCH, sized_delete_smaller},
    {"delete-malloc", MISMATCH, delete_malloc},
    {"free-new", MISMATCH, free_new},
    {"zero-size-write", ZERO_SIZE, zero_size_write},
    {"zero-size-read", ZERO_SIZE, zero_size_read},
  };
} // namespace

int main(int argc, char** argv)
{
  if (argc == 2 && std::strcmp(argv[1], "--list") == 0)
  {
    for (const Entry& e : bugs)
      std::printf("%s %s %s\n", e.name, e.kind, e.sizes);
    return 0;
  }
  if (argc != 3)
  {
    std::fprintf(stderr, "usage: heap_bugs --list | heap_bugs <bug> <size>\n");
    return 2;
  }
  for (const Entry& e : bugs)
  {
    if (std::strcmp(argv[1], e.name) == 0)
    {
      e.run(std::strtoull(argv[2], nullptr, 0));
      churn(64);
      std::printf("reached the end\n");
      return 0;
    }
  }
  std::fprintf(stderr, "unknown bug %s\n", argv[1]);
  return 2;
}
