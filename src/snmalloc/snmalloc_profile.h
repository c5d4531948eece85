/*
 * The C API of snmalloc's heap profiler, for C and other languages.
 * Exported by libraries built with SNMALLOC_PROFILE=ON (libsnmallocshim-profile.so,
 * the static library).  Every int-returning function returns 0 or an errno value.
 */
#ifndef SNMALLOC_PROFILE_C_API_H
#define SNMALLOC_PROFILE_C_API_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Start sampling, one sample per `mean_interval_bytes` allocated bytes on
   average (1 samples every allocation).  EINVAL for 0. */
int snmalloc_profile_start(size_t mean_interval_bytes);
/* Sampling modes (docs/profiling.md, "Sampling modes"). */
#define SNMALLOC_PROFILE_MODE_BYTES 0 /* Poisson on bytes, mean interval `rate` bytes */
#define SNMALLOC_PROFILE_MODE_COUNT 1 /* each allocation with probability 1/rate */
#define SNMALLOC_PROFILE_MODE_SIZECLASS 2 /* one in every `rate` allocations of each sizeclass */
/* Start sampling in `mode` (one of the above) at `rate` bytes or
   allocations; 1 samples every allocation.  EINVAL for rate 0 or an
   unknown mode. */
int snmalloc_profile_start_mode(int mode, size_t rate);
/* The mode of the last start (SNMALLOC_PROFILE_MODE_BYTES before any). */
int snmalloc_profile_mode(void);
/* Guarded sampling (docs/profiling.md): at most `limit` sampled objects
   placed against inaccessible pages at a time (0: off), at most
   `per_second` new ones a second (0: the default, 1000).  Needs sampling
   started.  The SIGSEGV handler that reports their faults is installed at
   the first call, chaining to the one installed before.  EINVAL for a
   limit over 65536, EBUSY for one over the reservation the first limit
   made (2 slots per object), ENOMEM. */
int snmalloc_profile_set_guard(size_t limit, size_t per_second);
/* Objects guarded since the process started. */
uint64_t snmalloc_profile_guarded_total(void);
/* Take no more samples; those taken stay until their objects are freed. */
int snmalloc_profile_stop(void);
int snmalloc_profile_is_active(void);
/* Samples not taken because memory ran out (the allocation was served
   unsampled, or failed with ENOMEM); also a comment in every dump. */
uint64_t snmalloc_profile_samples_dropped(void);
/* Frames recorded per sample, 1..256 (default 64). */
int snmalloc_profile_set_max_depth(size_t depth);
/* Write a gzipped pprof heap profile; to a temporary file renamed into place. */
int snmalloc_profile_dump(const char* path);
int snmalloc_profile_dump_fd(int fd);
/* The same, of the peak-heap profile: the live heap as it was when the
   estimated live heap was highest (within a 32nd of it, plus sampling
   error); its alloc_* figures are those of now. */
int snmalloc_profile_dump_peak(const char* path);
int snmalloc_profile_dump_peak_fd(int fd);
/* The footprint profile: the process's resident memory (VmRSS, within a
   few percent) in one table: the sampled live heap by site, each object
   counted by its resident pages; the allocator's own memory as frames
   named "snmalloc: ..." (free slots of partly used slabs per sizeclass,
   freed chunks still resident, metadata, the profiler's memory); the rest
   of the process by mapping ("[binary: name]", "[stack]", ...).  Sample
   types resident_space and slab_waste_space (a site's share of the free
   slots of its sizeclass's slabs).  0 or an errno, as snmalloc_profile_dump. */
int snmalloc_profile_dump_footprint(const char* path);
int snmalloc_profile_dump_footprint_fd(int fd);
/* The lifetime profile: per allocation site, the sampled objects freed
   since the process started (freed_objects, lifetime in nanoseconds;
   labels lifetime=<1us .. >=1h and freed_by=same_thread|other_thread) and
   those alive now (live_objects, live_age; label age=...), weighted like
   the heap profile.  0 or an errno, as snmalloc_profile_dump. */
int snmalloc_profile_dump_lifetimes(const char* path);
int snmalloc_profile_dump_lifetimes_fd(int fd);
/* Start profiling and the dumps it should make, with the text the
   SNMALLOC_PROFILE variable takes, e.g. "rate=1m,dump_every=4g,keep=10"
   (see docs/profiling.md).  EINVAL for bad text (one line on stderr;
   nothing changes), EAGAIN if the dump helper thread cannot start. */
int snmalloc_profile_configure(const char* settings);

/* Allocation labels: until popped, the calling thread's allocations are
   labelled key=value in the heap, allocs, peak and lifetime profiles
   (pprof string labels: go tool pprof -tagfocus=key=value, -tagshow=key).
   Nestable; an inner label of the same key hides the outer one.  A sample
   keeps its labels whichever thread frees it and after its thread exits.
   The strings are read at the samples taken until the pop, not copied at
   the push: key and value must stay valid and unchanged until the
   matching pop.  Push: 0; E2BIG past 8 labels (the push adds nothing, but
   stands and is popped as any other); EINVAL for a NULL or empty key or a
   NULL value, pushing nothing.  A key or value over 64 bytes is cut, and
   past the process's 65536 label sets a label adds nothing; both are
   found at the next sample, so push returns 0 for them and only the
   profile's truncation count says so.  Pop: 0; EINVAL when nothing is
   pushed.
   Exported by every shim library: built without SNMALLOC_PROFILE, both
   keep nothing and return 0. */
int snmalloc_profile_label_push(const char* key, const char* value);
int snmalloc_profile_label_pop(void);

/* Serve the profiles and statistics over HTTP until
   snmalloc_profile_http_stop() or exit: /debug/pprof/heap, /allocs, /peak,
   /lifetimes (gzipped pprof; heap, allocs and lifetimes take ?seconds=N),
   /debug/pprof/ and
   /metrics (Prometheus text).  `address` is "host:port" with a numeric
   host: "127.0.0.1:6060", ":0" (loopback, any free port), "[::1]:6060";
   a non-loopback address is served with a warning on stderr.  *port (if
   not NULL) receives the port.  EINVAL for a bad address, EBUSY if
   already serving, else the errno of bind/listen. */
int snmalloc_profile_http_start(const char* address, uint16_t* port);
/* ESRCH if not serving. */
int snmalloc_profile_http_stop(void);
/* The port served on; 0 when not serving. */
uint16_t snmalloc_profile_http_port(void);

/* One sampled object. */
struct snmalloc_profile_sample
{
  uintptr_t address;
  size_t requested_size;
  size_t allocated_size; /* the size it occupies (its sizeclass) */
  double weight; /* objects it stands for: 1 / (1 - exp(-allocated_size / interval))
                    in bytes mode, interval in the others */
  size_t interval; /* sampling rate in force when it was taken (bytes or allocations) */
  uint64_t thread_id; /* OS thread id of the allocating thread */
  int64_t time_ns; /* CLOCK_REALTIME when it was sampled */
  uint32_t depth;
  const uintptr_t* frames; /* return addresses, innermost first; valid for the life of the process */
  uint32_t mode; /* SNMALLOC_PROFILE_MODE_* it was sampled in */
};

/* A copy of the live samples, taken under the profiler's locks into memory
   allocated before them; iterate it at leisure, then free it. */
typedef struct snmalloc_profile_snapshot snmalloc_profile_snapshot;
int snmalloc_profile_snapshot_take(snmalloc_profile_snapshot** out);
size_t snmalloc_profile_snapshot_count(const snmalloc_profile_snapshot* snapshot);
/* ERANGE for i >= count. */
int snmalloc_profile_snapshot_get(
  const snmalloc_profile_snapshot* snapshot, size_t i, struct snmalloc_profile_sample* out);
void snmalloc_profile_snapshot_free(snmalloc_profile_snapshot* snapshot);

/* Births and deaths of sampled objects, in a bounded buffer of `capacity`
   events (rounded up to a power of two).  Producers never block: when the
   buffer is full, events are dropped and counted. */
#define SNMALLOC_PROFILE_EVENT_ALLOC 1
#define SNMALLOC_PROFILE_EVENT_FREE 2
struct snmalloc_profile_event
{
  uint32_t kind;
  struct snmalloc_profile_sample sample;
};
int snmalloc_profile_events_start(size_t capacity);
/* Copies up to `max` events out and returns how many; `*dropped_total`
   (if not NULL) receives the number dropped since events_start.  One reader
   at a time. */
size_t snmalloc_profile_events_read(
  struct snmalloc_profile_event* out, size_t max, uint64_t* dropped_total);
int snmalloc_profile_events_stop(void);

#ifdef __cplusplus
}
#endif
#endif
