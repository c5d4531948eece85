// One small program per heap bug: `heap_bugs <bug> <size>` commits the bug
// on a block of `size` bytes, then does a little ordinary work and prints
// "reached the end".  An allocator "catches" the bug when the program stops
// before that line.  `heap_bugs --list` prints the bugs.  Built at -O0 with
// -fno-builtin so the compiler neither removes nor diagnoses the bugs.
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

  void memcpy_underflow_by(size_t size, size_t by)
  {
    char* p = block(size);
    char* source = static_cast<char*>(std::calloc(1, by));
    std::memcpy(p - by, source, by);
    std::free(source);
    std::free(p);
    churn(size);
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

  struct Entry
  {
    const char* name;
    Bug run;
  };

  const Entry bugs[] = {
    {"double-free-immediate", double_free_immediate},
    {"double-free-delayed", double_free_delayed},
    {"double-free-interleaved", double_free_interleaved},
    {"double-free-after-reuse", double_free_after_reuse},
    {"double-free-other-thread", double_free_other_thread},
    {"double-delete", double_delete},
    {"realloc-after-free", realloc_after_free},
    {"free-stack", free_stack},
    {"free-global", free_global},
    {"free-unaligned", free_unaligned},
    {"free-interior", free_interior},
    {"free-far", free_far},
    {"overflow-1", overflow_1},
    {"overflow-32", overflow_32},
    {"overflow-1mib", overflow_1mib},
    {"underflow-1", underflow_1},
    {"underflow-32", underflow_32},
    {"underflow-1mib", underflow_1mib},
    {"memcpy-overflow-1", memcpy_overflow_1},
    {"memcpy-overflow-32", memcpy_overflow_32},
    {"memcpy-overflow-1mib", memcpy_overflow_1mib},
    {"memcpy-underflow-1", memcpy_underflow_1},
    {"memcpy-underflow-32", memcpy_underflow_32},
    {"memcpy-underflow-1mib", memcpy_underflow_1mib},
    {"memset-overflow-1", memset_overflow_1},
    {"memmove-overflow-32", memmove_overflow_32},
    {"strcpy-overflow", strcpy_overflow},
    {"strcat-overflow", strcat_overflow},
    {"write-after-free", write_after_free},
    {"write-after-free-first-word", write_after_free_first_word},
    {"memcpy-after-free", memcpy_after_free},
    {"delete-array-with-delete", delete_array_with_delete},
    {"delete-with-delete-array", delete_with_delete_array},
    {"sized-delete-wrong-size", sized_delete_wrong_size},
    {"sized-delete-smaller", sized_delete_smaller},
    {"delete-malloc", delete_malloc},
    {"free-new", free_new},
    {"zero-size-write", zero_size_write},
    {"zero-size-read", zero_size_read},
  };
} // namespace

int main(int argc, char** argv)
{
  if (argc == 2 && std::strcmp(argv[1], "--list") == 0)
  {
    for (const Entry& e : bugs)
      std::printf("%s\n", e.name);
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
