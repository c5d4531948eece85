// Helpers for tests that allocate: the identity probe, barriers that keep
// the compiler from folding allocations away, block stamping, and the
// resident set size.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <unistd.h>

// Exported by the shim; returns "snmalloc". Linking it also pulls the shim's
// object out of the static archive, so malloc and friends are ours.
extern "C" const char* snmalloc_identity(void);

// C23's sized frees, which the shim defines and glibc 2.36's headers do not
// declare yet.
extern "C" void free_sized(void* p, size_t size);
extern "C" void free_aligned_sized(void* p, size_t align, size_t size);

namespace snmalloc_test
{
  // Hides a size from the optimiser so calls like malloc(SIZE_MAX) are
  // really made at run time (and draw no -Walloc-size-larger-than warning).
  inline size_t opaque(size_t n)
  {
    asm volatile("" : "+r"(n));
    return n;
  }

  // Makes a pointer escape, so an allocation and its free cannot be elided.
  inline void escape(const void* p)
  {
    asm volatile("" : : "r"(p) : "memory");
  }

  inline uint64_t mix(uint64_t x)
  {
    x ^= x >> 31;
    x *= 0x7fb5d329728ea185ULL;
    x ^= x >> 27;
    x *= 0x81dadef4bc2dd44dULL;
    x ^= x >> 33;
    return x;
  }

  // Writes a pattern derived from seed over all n bytes of p.
  inline void stamp(void* p, size_t n, uint64_t seed)
  {
    auto* bytes = static_cast<unsigned char*>(p);
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
    {
      uint64_t word = mix(seed + i);
      std::memcpy(bytes + i, &word, 8);
    }
    uint64_t tail = mix(seed + i);
    std::memcpy(bytes + i, &tail, n - i);
  }

  // True if all n bytes of p still hold the pattern stamp(p, n, seed) wrote.
  inline bool stamp_intact(const void* p, size_t n, uint64_t seed)
  {
    auto* bytes = static_cast<const unsigned char*>(p);
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
    {
      uint64_t word = mix(seed + i);
      if (std::memcmp(bytes + i, &word, 8) != 0)
        return false;
    }
    uint64_t tail = mix(seed + i);
    return std::memcmp(bytes + i, &tail, n - i) == 0;
  }

  // Writes and reads back every byte of [p, p + n): proves the whole range
  // is mapped, writable and not shared with anything the writes disturb.
  inline bool whole_range_writable(void* p, size_t n, uint64_t seed = 1)
  {
    stamp(p, n, seed);
    return stamp_intact(p, n, seed);
  }

  inline bool is_aligned(const void* p, size_t align)
  {
    return (reinterpret_cast<uintptr_t>(p) & (align - 1)) == 0;
  }

  inline bool all_zero(const void* p, size_t n)
  {
    auto* bytes = static_cast<const unsigned char*>(p);
    for (size_t i = 0; i < n; i++)
      if (bytes[i] != 0)
        return false;
    return true;
  }

  // Resident set size of this process in bytes, from /proc/self/statm.
  inline size_t resident_bytes()
  {
    FILE* f = std::fopen("/proc/self/statm", "r");
    if (f == nullptr)
      return 0;
    unsigned long total_pages = 0, resident_pages = 0;
    int fields = std::fscanf(f, "%lu %lu", &total_pages, &resident_pages);
    std::fclose(f);
    if (fields != 2)
      return 0;
    return resident_pages * static_cast<size_t>(sysconf(_SC_PAGESIZE));
  }
} // namespace snmalloc_test
