/*
 * The allocator's statistics, for C and other languages.  Exported by every
 * build of the library (with or without profiling).  A plain struct with a
 * fixed array, so a reader (a metrics endpoint, say) needs no allocation.
 *
 * What the figures mean (src/snmalloc/mem/heap_counts.h has the details):
 * they are counted on the allocator's slow paths only, never on malloc or
 * free's fast paths.  Small objects are counted per slab, exactly as of
 * each slab's last refill from it or its release; frees in between are
 * seen at the slab's next such event.  So
 * live figures are upper bounds of what the program holds: they also count
 * objects cached in threads' fast lists (at most one slab's batch per class
 * per thread) and remote frees not yet handled by their owner.  Reading
 * first handles the calling thread's and idle allocators' pending remote
 * frees and recounts their awake slabs.  Large objects are counted exactly, at chunk (16 KiB) granularity.
 */
#ifndef SNMALLOC_STATS_C_API_H
#define SNMALLOC_STATS_C_API_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Small sizeclasses: 16 bytes to 64 KiB. */
#define SNMALLOC_STATS_SIZECLASSES 44

struct snmalloc_sizeclass_stats
{
  uint64_t object_size; /* bytes per object of the class */
  uint64_t live_objects; /* objects out of their slabs (see above) */
  uint64_t slabs; /* slabs of the class */
  uint64_t slab_bytes; /* bytes of those slabs */
};

struct snmalloc_stats
{
  /* Bytes of live objects: small objects at their class's size, plus large
     runs; allocated minus freed as described above. */
  uint64_t live_bytes;
  /* The highest live_bytes since the process started. */
  uint64_t peak_live_bytes;
  uint64_t small_live_bytes;
  uint64_t large_live_bytes; /* bytes of large runs (sampled ones too) */
  uint64_t large_runs;
  /* Bytes of all slabs: the small objects' live bytes plus their free ones. */
  uint64_t slab_bytes;
  /* Chunks handed out (slabs, runs, metadata) plus freed chunks whose pages
     have not been returned to the OS yet: an upper bound of the heap's
     resident memory (the pagemap and untouched pages aside). */
  uint64_t resident_bytes;
  uint64_t meta_bytes; /* slab descriptors and allocators */
  /* Memory the heap profiler keeps for itself (0 without profiling): its
     stack table and live samples' records. */
  uint64_t profiler_bytes;
  /* Samples the heap profiler dropped because memory ran out (0 without
     profiling); also said in a comment of every profile. */
  uint64_t profile_samples_dropped;
  uint64_t sizeclass_count; /* SNMALLOC_STATS_SIZECLASSES */
  struct snmalloc_sizeclass_stats sizeclasses[SNMALLOC_STATS_SIZECLASSES];
};

/* Fill *out; 0, or EINVAL for a null pointer. */
int snmalloc_stats(struct snmalloc_stats* out);

/*
 * The census: visit(ptr, usable_size, arg) once for each live object, one
 * handed out and not freed, with its malloc_usable_size.  Which ones:
 *   - the small objects of the calling thread's allocator and of the
 *     allocators of threads that have exited (their objects outlive them);
 *     not those of other running threads' allocators, whose free lists
 *     only their own thread may read;
 *   - every large object, every object the heap profiler sampled (they
 *     live apart from the others), every malloc(0) object (size 0).
 * Exact for the small objects, with one exception: an object another
 * running thread freed is visited until that thread has posted the free
 * to the object's allocator (it batches them; a thread posts its batches
 * when they fill, and at exit).  The calling thread's own frees are all
 * seen.  Large, sampled and malloc(0) objects that other threads allocate
 * or free while the walk runs are visited or not, each as it stood when
 * the walk reached it.  A program that has its other threads joined, or
 * waiting after their last free has been posted, gets its heap exactly.
 * The visitor may read the object, but must not allocate, free or
 * resize through this allocator: the walk holds allocator locks and reads
 * the calling thread's free lists between visits.  Meanwhile threads that
 * start or exit wait for the walk's small and large objects, and a free of
 * a sampled object for its sample list's.  Objects are visited in no
 * particular order.  About 55 instructions a live object.
 */
void snmalloc_heap_walk(void (*visit)(void* ptr, size_t usable_size, void* arg), void* arg);

#ifdef __cplusplus
}
#endif

#endif
