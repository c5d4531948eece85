// holdmem: holds memory at a few named call sites, frees some churn, and
// writes a heap profile of what is still live.
//
//   holdmem [profile-path]          (default holdmem.pb.gz)
//   go tool pprof -top holdmem holdmem.pb.gz
//
// The program prints what each site holds, counted exactly; pprof's
// inuse_space numbers are estimates from sampled allocations (one sample per
// 64 KiB allocated on average) and should come within a few percent.
//
// The pointers that keep the memory alive are kept in static arrays, not on
// the heap, so the bookkeeping adds nothing to the profile.  The functions
// are noinline with external linkage so that each one is its own frame with
// its own name in the profile.
#include <snmalloc/snmalloc.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <thread>

namespace
{
  constexpr size_t KiB = 1024;
  constexpr size_t MiB = 1024 * KiB;
  constexpr size_t sampling_interval_bytes = 64 * KiB;

  // What one call site holds, as the program itself counts it.
  struct Holding
  {
    const char* site;
    size_t bytes;
    size_t objects;
  };

  constexpr size_t cache_block_bytes = 4 * KiB;
  constexpr size_t cache_block_count = 64 * MiB / cache_block_bytes;
  char* cache_blocks[cache_block_count];

  // 48 bytes: a sizeclass of its own, as the index nodes of a real program.
  struct IndexNode
  {
    IndexNode* next;
    uint64_t key;
    uint64_t fields[4];
  };
  static_assert(sizeof(IndexNode) == 48, "index nodes are 48 bytes");
  IndexNode* index_head;

  constexpr size_t record_bytes_total = 8 * MiB;
  constexpr size_t record_min_bytes = 32;
  char* records[record_bytes_total / record_min_bytes];

  constexpr size_t leaked_buffer_bytes = 2 * MiB;
  constexpr size_t leaked_buffer_count = 3;
  void* leaked_buffers[leaked_buffer_count];

  // Short-lived allocations cycle through these slots; each new one frees the
  // one before it, so the compiler cannot drop the pairs.
  constexpr size_t churn_bytes_total = 256 * MiB;
  char* churn_slots[64];
} // namespace

[[gnu::noinline]] Holding build_cache()
{
  for (size_t i = 0; i < cache_block_count; i++)
  {
    cache_blocks[i] = new char[cache_block_bytes];
    std::memset(cache_blocks[i], static_cast<int>(i), cache_block_bytes);
  }
  return {"build_cache", cache_block_count * cache_block_bytes, cache_block_count};
}

[[gnu::noinline]] Holding load_index()
{
  constexpr size_t node_count = 16 * MiB / sizeof(IndexNode);
  for (size_t i = 0; i < node_count; i++)
    index_head = new IndexNode{index_head, i, {i, i * 2, i * 3, i * 4}};
  return {"load_index", node_count * sizeof(IndexNode), node_count};
}

[[gnu::noinline]] Holding parse_records()
{
  size_t bytes = 0;
  size_t count = 0;
  while (bytes < record_bytes_total)
  {
    // Lengths from 32 to 255 bytes, so the strings spread over sizeclasses.
    size_t length = record_min_bytes + (count * 37) % 224;
    char* record = static_cast<char*>(std::malloc(length));
    std::memset(record, 'a' + static_cast<int>(count % 26), length - 1);
    record[length - 1] = '\0';
    records[count++] = record;
    bytes += length;
  }
  return {"parse_records", bytes, count};
}

[[gnu::noinline]] Holding leak_buffers()
{
  for (auto& buffer : leaked_buffers)
  {
    buffer = std::malloc(leaked_buffer_bytes);
    std::memset(buffer, 0xab, leaked_buffer_bytes);
  }
  return {
    "leak_buffers", leaked_buffer_count * leaked_buffer_bytes,
    leaked_buffer_count};
}

// Allocates and frees churn_bytes_total in sizes from 16 bytes to 16 KiB.
// None of it is live at the dump; pprof shows it under alloc_space.
[[gnu::noinline]] size_t churn_temporaries()
{
  size_t bytes = 0;
  for (size_t i = 0; bytes < churn_bytes_total; i++)
  {
    size_t size = size_t{16} << (i % 11);
    char*& slot = churn_slots[i % std::size(churn_slots)];
    delete[] slot;
    slot = new char[size];
    slot[0] = static_cast<char>(i);
    bytes += size;
  }
  for (char*& slot : churn_slots)
  {
    delete[] slot;
    slot = nullptr;
  }
  return bytes;
}

int main(int argc, char** argv)
{
  const char* profile_path = argc > 1 ? argv[1] : "holdmem.pb.gz";

  if (int error = snmalloc::profile::start(sampling_interval_bytes); error != 0)
  {
    std::fprintf(
      stderr, "holdmem: profile::start failed: %s\n", std::strerror(error));
    return 1;
  }

  Holding holdings[4];
  holdings[0] = build_cache();
  holdings[1] = load_index();
  holdings[2] = parse_records();
  // A second thread allocates these and exits before the dump: its samples
  // stay in the profile because the memory is still live.
  std::thread([&] { holdings[3] = leak_buffers(); }).join();
  size_t churned = churn_temporaries();

  snmalloc::profile::DumpResult result = snmalloc::profile::dump(profile_path);
  snmalloc::profile::stop();
  if (!result.ok())
  {
    std::fprintf(
      stderr,
      "holdmem: writing %s failed: %s\n",
      profile_path,
      result.message());
    return 1;
  }

  std::printf("%-16s %12s %10s\n", "site", "live MiB", "objects");
  size_t total_bytes = 0;
  for (const Holding& holding : holdings)
  {
    std::printf(
      "%-16s %12.2f %10zu\n",
      holding.site,
      static_cast<double>(holding.bytes) / MiB,
      holding.objects);
    total_bytes += holding.bytes;
  }
  std::printf(
    "%-16s %12.2f\n", "total", static_cast<double>(total_bytes) / MiB);
  std::printf(
    "churned %.0f MiB in short-lived allocations, all freed (alloc_space)\n",
    static_cast<double>(churned) / MiB);
  std::printf(
    "heap profile (one sample per %zu KiB on average) written to %s\n",
    sampling_interval_bytes / KiB,
    profile_path);
  return 0;
}
