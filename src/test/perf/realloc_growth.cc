// Realloc growth: eight buffers, grown in turn by small steps from 16
// bytes to about 1 MiB, as strings and vectors that append are.  Each
// step's new bytes are filled with a pattern that depends on the buffer,
// not on its address, so a realloc that moves the buffer must carry the
// contents: the first and last word and one word per page are checked
// after every step, and every word before the buffer is freed.
//
// One operation = one realloc call.
#include "block_stamp.h"
#include "fast_random.h"
#include "harness.h"

#include <cstdlib>
#include <cstring>

namespace
{
  constexpr size_t buffers = 8;
  constexpr size_t initial_size = 16;
  constexpr size_t final_size = size_t{1} << 20;
  constexpr size_t word = sizeof(uint64_t);

  struct GrowingBuffer
  {
    uint64_t* words = nullptr;
    size_t size = 0; // bytes, a multiple of the word size
    uint64_t key = 0;
  };

  void fill_words(GrowingBuffer& buffer, size_t from_byte)
  {
    for (size_t offset = from_byte; offset < buffer.size; offset += word)
      buffer.words[offset / word] = bench::stamp_word(buffer.key, offset);
  }

  void check(const GrowingBuffer& buffer, size_t stride)
  {
    for (size_t offset = 0; offset < buffer.size; offset += stride)
      if (buffer.words[offset / word] != bench::stamp_word(buffer.key, offset))
        bench::fail(
          "realloc-growth: buffer %p of %zu bytes lost its contents at offset %zu",
          static_cast<void*>(buffer.words),
          buffer.size,
          offset);
    size_t last = buffer.size - word;
    if (buffer.words[last / word] != bench::stamp_word(buffer.key, last))
      bench::fail(
        "realloc-growth: buffer %p of %zu bytes lost its last word",
        static_cast<void*>(buffer.words),
        buffer.size);
  }

  void start(GrowingBuffer& buffer, uint64_t key)
  {
    buffer.words = static_cast<uint64_t*>(std::malloc(initial_size));
    if (buffer.words == nullptr)
      bench::fail("realloc-growth: malloc(%zu) returned null", initial_size);
    buffer.size = initial_size;
    buffer.key = key;
    fill_words(buffer, 0);
  }

  void finish(GrowingBuffer& buffer)
  {
    check(buffer, word);
    std::free(buffer.words);
  }

  // Steps of 16 bytes while small, then of about 1/16 of the size: the
  // growth of an append-heavy buffer without a doubling policy, which
  // leaves in-place growth to the allocator.
  size_t next_size(size_t size, bench::FastRandom& random)
  {
    size_t step = size / 16 > 16 ? random.between(size / 32, size / 16) : 16;
    return (size + step + word - 1) / word * word;
  }
} // namespace

int main(int argc, char** argv)
{
  bench::Options options = bench::parse_options(argc, argv, 300'000, 2'000);
  bench::FastRandom random(1);
  GrowingBuffer growing[buffers];
  uint64_t next_key = 1;

  bench::Stopwatch stopwatch;
  for (GrowingBuffer& buffer : growing)
    start(buffer, next_key++);
  for (uint64_t op = 0; op < options.ops; op++)
  {
    GrowingBuffer& buffer = growing[op % buffers];
    size_t old_size = buffer.size;
    buffer.size = next_size(old_size, random);
    void* grown = std::realloc(buffer.words, buffer.size);
    if (grown == nullptr)
      bench::fail("realloc-growth: realloc to %zu returned null", buffer.size);
    buffer.words = static_cast<uint64_t*>(grown);
    check(GrowingBuffer{buffer.words, old_size, buffer.key}, 4096);
    fill_words(buffer, old_size);
    if (buffer.size >= final_size)
    {
      finish(buffer);
      start(buffer, next_key++);
    }
  }
  for (GrowingBuffer& buffer : growing)
    finish(buffer);
  bench::Elapsed elapsed = stopwatch.elapsed();

  bench::report("realloc-growth", 1, options.ops, elapsed);
  return 0;
}
