#pragma once
// Layer pal: Linux address-space, error, time and entropy primitives.
// Nothing here allocates through malloc.

#include "../ds_core/ds_core.h"

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <ucontext.h>
#include <unistd.h>

namespace snmalloc
{
  // One line on stderr, then abort(): SIGABRT, which test harnesses and
  // crash reporters recognise (a trap instruction gave SIGILL).  write(2)
  // only: the heap may be the thing that is broken.
  [[noreturn]] inline void report_fatal(const char* message) noexcept
  {
    static const char prefix[] = "snmalloc: fatal: ";
    (void)!::write(2, prefix, sizeof(prefix) - 1);
    (void)!::write(2, message, std::strlen(message));
    (void)!::write(2, "\n", 1);
    std::abort();
  }

  // The same, with the address the message is about: "<message> 0x<hex>".
  [[noreturn]] inline void report_fatal_at(const char* message, const void* address) noexcept
  {
    char line[160];
    size_t n = std::strlen(message);
    if (n > sizeof(line) - 24)
      n = sizeof(line) - 24;
    std::memcpy(line, message, n);
    line[n++] = ' ';
    line[n++] = '0';
    line[n++] = 'x';
    uintptr_t a = reinterpret_cast<uintptr_t>(address);
    int shift = 60;
    while (shift > 0 && ((a >> shift) & 0xf) == 0)
      shift -= 4;
    for (; shift >= 0; shift -= 4)
      line[n++] = "0123456789abcdef"[(a >> shift) & 0xf];
    line[n] = '\0';
    report_fatal(line);
  }

  // glibc's copies, which nothing interposes (unlike memcpy, which the
  // checks shims define: override/checked_copies.h).
  namespace glibc
  {
    extern "C" void* __memcpy_chk(void*, const void*, size_t, size_t) noexcept;
    extern "C" void* __memmove_chk(void*, const void*, size_t, size_t) noexcept;
    extern "C" void* __memset_chk(void*, int, size_t, size_t) noexcept;
    // Volatile, so that the compiler cannot fold the calls back into calls
    // of memcpy and memset.
    inline void* (*volatile memcpy)(void*, const void*, size_t, size_t) noexcept = &__memcpy_chk;
    inline void* (*volatile memmove)(void*, const void*, size_t, size_t) noexcept = &__memmove_chk;
    inline void* (*volatile memset)(void*, int, size_t, size_t) noexcept = &__memset_chk;
  } // namespace glibc

  // Fills of 64 bytes or more whose every call matters: the checks build
  // poisons each freed object over 64 bytes.  glibc's memset took 40
  // instructions a call on larson's 80-512 byte objects (callgrind), for
  // 8 stores on average; where the CPU has AVX2 (the build targets
  // baseline x86-64), a loop of 32-byte stores with the last 128 bytes
  // stored overlapping takes a third of that.  Chosen at the first call.
  namespace wide_fill
  {
    using Fill = void (*)(void*, int, size_t) noexcept;

    inline void fill_glibc(void* dst, int c, size_t n) noexcept
    {
      glibc::memset(dst, c, n, n);
    }

#if defined(__x86_64__)
    // Beyond this, glibc's `rep stosb` is the faster.
    constexpr size_t AVX2_MAX = 2048;

    __attribute__((target("avx2"))) inline void fill_avx2(void* dst, int c, size_t n) noexcept
    {
      if (n > AVX2_MAX)
        return fill_glibc(dst, c, n);
      using Bytes32 = unsigned char __attribute__((vector_size(32)));
      const Bytes32 v = Bytes32{} + static_cast<unsigned char>(c);
      char* at = static_cast<char*>(dst);
      char* end = at + n;
      if (n > 128)
      {
        for (; at < end - 128; at += 128)
        {
          __builtin_memcpy(at, &v, 32);
          __builtin_memcpy(at + 32, &v, 32);
          __builtin_memcpy(at + 64, &v, 32);
          __builtin_memcpy(at + 96, &v, 32);
        }
        at = end - 128;
        __builtin_memcpy(at, &v, 32);
        __builtin_memcpy(at + 32, &v, 32);
      }
      __builtin_memcpy(end - 64, &v, 32);
      __builtin_memcpy(end - 32, &v, 32);
      if (n <= 128)
      {
        __builtin_memcpy(at, &v, 32);
        __builtin_memcpy(at + 32, &v, 32);
      }
    }

    inline Fill choose() noexcept
    {
      __builtin_cpu_init(); // may run before the constructors that would
      return __builtin_cpu_supports("avx2") ? &fill_avx2 : &fill_glibc;
    }
#else
    inline Fill choose() noexcept
    {
      return &fill_glibc;
    }
#endif

    inline void fill_first(void* dst, int c, size_t n) noexcept;
    // Relaxed: every thread that reads it stores what any other would.
    inline std::atomic<Fill> fill{&fill_first};

    inline void fill_first(void* dst, int c, size_t n) noexcept
    {
      Fill f = choose();
      fill.store(f, std::memory_order_relaxed);
      f(dst, c, n);
    }
  } // namespace wide_fill

  struct PalLinux
  {
    // The allocator's own copies and fills of heap objects.  The checks
    // build bypasses its bounds-checked memcpy family: the allocator knows
    // the bounds, and a free's poisoning would be a write to a freed
    // object.  Elsewhere the compiler's memcpy and memset, inlined where
    // it can.
    SNMALLOC_FAST_PATH static void copy(void* dst, const void* src, size_t n) noexcept
    {
      if constexpr (config::checks)
        glibc::memcpy(dst, src, n, n);
      else
        std::memcpy(dst, src, n);
    }

    SNMALLOC_FAST_PATH static void fill(void* dst, int c, size_t n) noexcept
    {
      if constexpr (config::checks)
        glibc::memset(dst, c, n, n);
      else
        std::memset(dst, c, n);
    }

    // n >= 64: see wide_fill.
    SNMALLOC_FAST_PATH static void fill_wide(void* dst, int c, size_t n) noexcept
    {
      wide_fill::fill.load(std::memory_order_relaxed)(dst, c, n);
    }

    static constexpr size_t PAGE_SIZE = 4096;

    // Address space with no access and no commit charge; nullptr on failure.
    static void* reserve(size_t size) noexcept
    {
      return map_reserved(nullptr, size, 0);
    }

    // As reserve, at exactly `at`, if nothing is mapped there yet.
    static void* reserve_at(uintptr_t at, size_t size) noexcept
    {
      void* wanted = reinterpret_cast<void*>(at);
      void* p = map_reserved(wanted, size, MAP_FIXED_NOREPLACE);
      if (p == wanted)
        return p;
      // A kernel before 4.17 takes the address as a hint only.
      if (p != nullptr)
        ::munmap(p, size);
      return nullptr;
    }

    // Address space the process may still map under RLIMIT_AS: the limit
    // less its size now (/proc/self/statm, read without allocating);
    // SIZE_MAX with no limit, or if the size cannot be read.
    static size_t address_space_left() noexcept
    {
      rlimit limit{};
      if (::getrlimit(RLIMIT_AS, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY)
        return SIZE_MAX;
      int fd = ::open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
      if (fd < 0)
        return SIZE_MAX;
      char text[64];
      ssize_t n = ::read(fd, text, sizeof(text) - 1);
      ::close(fd);
      if (n <= 0)
        return SIZE_MAX;
      size_t pages = 0;
      for (ssize_t i = 0; i < n && text[i] >= '0' && text[i] <= '9'; i++)
        pages = pages * 10 + size_t(text[i] - '0');
      size_t used = pages * PAGE_SIZE;
      return used < limit.rlim_cur ? size_t(limit.rlim_cur) - used : 0;
    }

    // `size` bytes of address space, as reserve, at a multiple of `align` (a
    // power of two).  Over-reserving by `align` and trimming is the usual
    // way; where RLIMIT_AS leaves no room for that slack (it doubles an
    // arena of 4 GiB or less), the aligned address just below or above
    // where the kernel places `size` bytes, if that is free.
    static void* reserve_aligned(size_t size, size_t align) noexcept
    {
      if (void* raw = reserve(size + align))
      {
        uintptr_t start = reinterpret_cast<uintptr_t>(raw);
        uintptr_t base = bits::align_up(start, align);
        if (base != start)
          ::munmap(raw, base - start);
        if (start + align != base)
          ::munmap(reinterpret_cast<void*>(base + size), start + align - base);
        return reinterpret_cast<void*>(base);
      }
      void* p = reserve(size);
      if (p == nullptr)
        return nullptr;
      uintptr_t at = reinterpret_cast<uintptr_t>(p);
      if ((at & (align - 1)) == 0)
        return p;
      ::munmap(p, size);
      if (void* below = reserve_at(at & ~(align - 1), size))
        return below;
      return reserve_at(bits::align_up(at, align), size);
    }

    // Readable, writable, lazily backed memory (used for the pagemap, which is
    // mostly never touched).  nullptr on failure.
    static void* reserve_lazy_rw(size_t size) noexcept
    {
      void* p = ::mmap(
        nullptr,
        size,
        PROT_READ | PROT_WRITE,
        MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
        -1,
        0);
      return p == MAP_FAILED ? nullptr : p;
    }

    // Make reserved space usable.  Pages read as zero until written.
    static bool commit(void* p, size_t size) noexcept
    {
      return ::mprotect(p, size, PROT_READ | PROT_WRITE) == 0;
    }

    // Give the physical pages back; the range stays usable and reads as zero.
    static void decommit(void* p, size_t size) noexcept
    {
      (void)::madvise(p, size, MADV_DONTNEED);
    }

    // Make [p, p+size) inaccessible (any access faults), its pages kept.
    // False if the kernel refuses.
    static bool protect(void* p, size_t size) noexcept
    {
      return ::mprotect(p, size, PROT_NONE) == 0;
    }

    // Make [p, p+size) inaccessible and give its pages back.  False if the
    // kernel refuses.
    static bool make_inaccessible(void* p, size_t size) noexcept
    {
      if (!protect(p, size))
        return false;
      decommit(p, size);
      return true;
    }

    // Move the pages of [from, from+size) to `to` (both page-aligned, inside
    // one read-write mapping) without copying them; `from` stays mapped and
    // reads as zero.  False when the kernel cannot (before Linux 5.7, or
    // under valgrind): the caller copies instead.
    static bool move_pages(void* from, void* to, size_t size) noexcept
    {
      void* r = ::mremap(
        from, size, size, MREMAP_MAYMOVE | MREMAP_FIXED | MREMAP_DONTUNMAP, to);
      return r == to;
    }

    // Replace [p, p+size) with fresh zero pages of a new mapping.  Pages that
    // move_pages took or brought keep the offset of the mapping they came
    // from, so the kernel cannot merge their range with its neighbours again;
    // a fresh mapping at the same place can, which keeps the process's map
    // count from growing with every move.  Also frees the physical pages.
    static void replace_pages(void* p, size_t size) noexcept
    {
      void* r = ::mmap(
        p,
        size,
        PROT_READ | PROT_WRITE,
        MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED,
        -1,
        0);
      if (r != p)
        decommit(p, size);
    }

    static uint64_t entropy64() noexcept
    {
      uint64_t value = 0;
      if (::getrandom(&value, sizeof(value), GRND_NONBLOCK) != sizeof(value))
        value = static_cast<uint64_t>(time_ns()) ^ (uint64_t(::getpid()) << 32);
      return value;
    }

    static int64_t time_ns() noexcept
    {
      timespec ts;
      ::clock_gettime(CLOCK_REALTIME, &ts);
      return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
    }

    static int64_t monotonic_ns() noexcept
    {
      timespec ts;
      ::clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
      return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
    }

    // To the nanosecond, for short intervals (a sampled object's life):
    // the coarse clock above ticks every 4 ms.  Through the vDSO, as cheap
    // as CLOCK_REALTIME (both about 90 ns a read measured on a loaded VM).
    static int64_t precise_monotonic_ns() noexcept
    {
      timespec ts;
      ::clock_gettime(CLOCK_MONOTONIC, &ts);
      return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
    }

    // In a SIGSEGV handler, from its context: 1 if the faulting access was
    // a write, 0 a read, -1 unknown on this architecture.
    static int fault_is_write(const void* context) noexcept
    {
#if defined(__x86_64__)
      const auto* uc = static_cast<const ucontext_t*>(context);
      return (uc->uc_mcontext.gregs[REG_ERR] & 2) != 0 ? 1 : 0;
#else
      (void)context;
      return -1;
#endif
    }

    // In a signal handler, from its context: the address of the
    // interrupted instruction (for a fault, the faulting one), 0 if unknown
    // on this architecture.
    static uintptr_t interrupted_instruction(const void* context) noexcept
    {
      const auto* uc = static_cast<const ucontext_t*>(context);
#if defined(__x86_64__)
      return uintptr_t(uc->uc_mcontext.gregs[REG_RIP]);
#elif defined(__aarch64__)
      return uintptr_t(uc->uc_mcontext.pc);
#else
      (void)uc;
      return 0;
#endif
    }

    static void pause() noexcept
    {
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#elif defined(__aarch64__)
      __asm__ volatile("yield");
#endif
    }

  private:
    // Inaccessible, uncharged address space; `flags` adds to the mmap flags.
    static void* map_reserved(void* hint, size_t size, int flags) noexcept
    {
      void* p = ::mmap(
        hint, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | flags, -1, 0);
      return p == MAP_FAILED ? nullptr : p;
    }
  };
} // namespace snmalloc
