// Correctness checking for the benchmarks: every block gets a pattern
// written into it after allocation, and the pattern is verified before the
// block is freed.  Two live blocks that overlap, a block handed out twice,
// or realloc losing contents all show up as a mismatch.
//
// Writing every byte would make the benchmarks measure memset, so one word
// is written per `stride` bytes (64: one per cache line for small objects;
// 4096: one per page for large ones, which also makes the allocator's
// memory resident) plus the last word of the block.
#pragma once

#include "harness.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace bench
{
  // The word expected at `offset` of a block stamped with `key`.
  inline uint64_t stamp_word(uint64_t key, size_t offset)
  {
    uint64_t x = key ^ (offset * 0xD6E8FEB86659FD93ULL);
    x ^= x >> 32;
    return x * 0x9E3779B97F4A7C15ULL;
  }

  // A key that differs between blocks: a block stamped for one address and
  // found at another (or with another size) does not verify.
  inline uint64_t block_key(const void* block, size_t size)
  {
    return reinterpret_cast<uintptr_t>(block) * 0xFF51AFD7ED558CCDULL ^ size;
  }

  // Calls `visit(offset)` for the offset of every stamped word; blocks
  // smaller than a word hold a single byte-wise stamp at offset 0.
  template<typename Visit>
  inline void for_each_stamp_offset(size_t size, size_t stride, Visit visit)
  {
    if (size < sizeof(uint64_t))
    {
      visit(size_t{0});
      return;
    }
    // Stamped words never overlap, or the last would overwrite another.
    size_t last = size - sizeof(uint64_t);
    for (size_t offset = 0; offset + sizeof(uint64_t) <= last; offset += stride)
      visit(offset);
    visit(last);
  }

  inline void stamp(void* block, size_t size, uint64_t key, size_t stride = 64)
  {
    char* bytes = static_cast<char*>(block);
    for_each_stamp_offset(size, stride, [&](size_t offset) {
      uint64_t word = stamp_word(key, offset);
      std::memcpy(bytes + offset, &word, size < sizeof(word) ? size : sizeof(word));
    });
  }

  inline void
  verify(const void* block, size_t size, uint64_t key, const char* what, size_t stride = 64)
  {
    const char* bytes = static_cast<const char*>(block);
    for_each_stamp_offset(size, stride, [&](size_t offset) {
      uint64_t expected = stamp_word(key, offset);
      uint64_t found = 0;
      size_t width = size < sizeof(found) ? size : sizeof(found);
      std::memcpy(&found, bytes + offset, width);
      if (std::memcmp(&found, &expected, width) != 0)
        fail(
          "%s: block %p of %zu bytes was overwritten at offset %zu "
          "(found %016llx, expected %016llx)",
          what,
          block,
          size,
          offset,
          static_cast<unsigned long long>(found),
          static_cast<unsigned long long>(expected));
    });
  }

  // Stamp and verify with the address-derived key.
  inline void stamp_block(void* block, size_t size, size_t stride = 64)
  {
    stamp(block, size, block_key(block, size), stride);
  }

  inline void verify_block(const void* block, size_t size, const char* what, size_t stride = 64)
  {
    verify(block, size, block_key(block, size), what, stride);
  }

  // A block from malloc with its size, stamped when allocated and verified
  // when freed; `what` names the workload in failure messages.
  struct StampedBlock
  {
    void* address = nullptr;
    size_t size = 0;
  };

  inline StampedBlock malloc_stamped(size_t size, const char* what, size_t stride = 64)
  {
    void* address = std::malloc(size);
    if (address == nullptr)
      fail("%s: malloc(%zu) returned null", what, size);
    stamp_block(address, size, stride);
    return StampedBlock{address, size};
  }

  inline void free_verified(const StampedBlock& block, const char* what, size_t stride = 64)
  {
    verify_block(block.address, block.size, what, stride);
    std::free(block.address);
  }

  // A heap of `count` stamped blocks of sizes drawn from [low, high].
  template<typename Random>
  std::vector<StampedBlock>
  malloc_stamped_heap(size_t count, Random& random, size_t low, size_t high, const char* what)
  {
    std::vector<StampedBlock> blocks(count);
    for (StampedBlock& block : blocks)
      block = malloc_stamped(random.between(low, high), what);
    return blocks;
  }
} // namespace bench
