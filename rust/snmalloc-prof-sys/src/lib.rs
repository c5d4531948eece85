//! Raw bindings to the snmalloc-prof allocator built with heap profiling.
//!
//! Linking this crate links the static library `snmallocshim-static` (built
//! by `build.rs` from this repository with CMake) as a whole archive: its
//! `malloc`, `free` and friends then replace the C library's for the whole
//! process, and C++ `operator new`/`delete` too.  The declarations mirror
//! `src/snmalloc/override/malloc.h` and `src/snmalloc/snmalloc_profile.h`;
//! every `int`-returning `snmalloc_profile_*` function returns 0 or an errno
//! value.  Use the `snmalloc-prof` crate for the safe API.
#![allow(non_camel_case_types)]

use std::os::raw::{c_char, c_int, c_void};

/// One sampled object (`struct snmalloc_profile_sample`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct snmalloc_profile_sample {
    pub address: usize,
    pub requested_size: usize,
    /// The size the object occupies (its sizeclass).
    pub allocated_size: usize,
    /// Objects this sample stands for: 1 / (1 - exp(-allocated_size / interval))
    /// in bytes mode, `interval` in the others.
    pub weight: f64,
    /// Sampling rate in force when the sample was taken (bytes or allocations).
    pub interval: usize,
    /// OS thread id (gettid) of the allocating thread.
    pub thread_id: u64,
    /// CLOCK_REALTIME when sampled, in nanoseconds.
    pub time_ns: i64,
    pub depth: u32,
    /// `depth` return addresses, innermost first; valid for the life of the process.
    pub frames: *const usize,
    /// `SNMALLOC_PROFILE_MODE_*` it was sampled in.
    pub mode: u32,
}

/// Sampling modes (`snmalloc_profile_start_mode`).
pub const SNMALLOC_PROFILE_MODE_BYTES: c_int = 0;
pub const SNMALLOC_PROFILE_MODE_COUNT: c_int = 1;
pub const SNMALLOC_PROFILE_MODE_SIZECLASS: c_int = 2;

/// A copy of the live samples (opaque).
#[repr(C)]
pub struct snmalloc_profile_snapshot {
    _opaque: [u8; 0],
}

pub const SNMALLOC_PROFILE_EVENT_ALLOC: u32 = 1;
pub const SNMALLOC_PROFILE_EVENT_FREE: u32 = 2;

/// A birth or death of a sampled object (`struct snmalloc_profile_event`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct snmalloc_profile_event {
    /// `SNMALLOC_PROFILE_EVENT_ALLOC` or `SNMALLOC_PROFILE_EVENT_FREE`.
    pub kind: u32,
    pub sample: snmalloc_profile_sample,
}

extern "C" {
    // The allocator (override/malloc.h).
    pub fn malloc(size: usize) -> *mut c_void;
    pub fn calloc(count: usize, size: usize) -> *mut c_void;
    pub fn realloc(ptr: *mut c_void, size: usize) -> *mut c_void;
    pub fn free(ptr: *mut c_void);
    pub fn aligned_alloc(align: usize, size: usize) -> *mut c_void;
    pub fn posix_memalign(out: *mut *mut c_void, align: usize, size: usize) -> c_int;
    /// 0 for memory this allocator does not own.
    pub fn malloc_usable_size(ptr: *mut c_void) -> usize;
    /// Returns the string "snmalloc".
    pub fn snmalloc_identity() -> *const c_char;

    // Control and dump (snmalloc_profile.h).
    /// EINVAL for 0.
    pub fn snmalloc_profile_start(mean_interval_bytes: usize) -> c_int;
    /// `mode` is a `SNMALLOC_PROFILE_MODE_*`; `rate` bytes or allocations.
    /// EINVAL for rate 0 or an unknown mode.
    pub fn snmalloc_profile_start_mode(mode: c_int, rate: usize) -> c_int;
    /// The mode of the last start.
    pub fn snmalloc_profile_mode() -> c_int;
    /// Guarded sampling: at most `limit` objects guarded at a time (0: off),
    /// `per_second` new ones a second (0: the default, 1000).
    pub fn snmalloc_profile_set_guard(limit: usize, per_second: usize) -> c_int;
    /// Objects guarded since the process started.
    pub fn snmalloc_profile_guarded_total() -> u64;
    pub fn snmalloc_profile_stop() -> c_int;
    /// 1 while sampling, else 0.
    pub fn snmalloc_profile_is_active() -> c_int;
    /// 1..=256 frames per sample (default 64).
    pub fn snmalloc_profile_set_max_depth(depth: usize) -> c_int;
    pub fn snmalloc_profile_dump(path: *const c_char) -> c_int;
    pub fn snmalloc_profile_dump_fd(fd: c_int) -> c_int;
    /// The peak-heap profile, to a path or a descriptor.
    pub fn snmalloc_profile_dump_peak(path: *const c_char) -> c_int;
    pub fn snmalloc_profile_dump_peak_fd(fd: c_int) -> c_int;
    /// Allocation labels of the calling thread: 0, E2BIG past 8 labels
    /// (the push stands), EINVAL for a null or empty key or a null value
    /// (nothing pushed).  Keeps the pointers: both strings must stay valid
    /// and unchanged until the matching pop.
    pub fn snmalloc_profile_label_push(key: *const c_char, value: *const c_char) -> c_int;
    /// 0, or EINVAL when nothing is pushed.
    pub fn snmalloc_profile_label_pop() -> c_int;
    /// The lifetime profile, to a path or a descriptor.
    pub fn snmalloc_profile_dump_footprint(path: *const c_char) -> c_int;
    pub fn snmalloc_profile_dump_footprint_fd(fd: c_int) -> c_int;
    pub fn snmalloc_profile_dump_lifetimes(path: *const c_char) -> c_int;
    pub fn snmalloc_profile_dump_lifetimes_fd(fd: c_int) -> c_int;
    /// Profiling and its automatic dumps from SNMALLOC_PROFILE-style text;
    /// EINVAL for bad text, EAGAIN if the helper thread cannot start.
    pub fn snmalloc_profile_configure(settings: *const c_char) -> c_int;

    // The HTTP endpoint.
    /// Serve profiles and statistics at `address` ("127.0.0.1:6060", ":0");
    /// `*port` (if not null) receives the port.  EINVAL for a bad address,
    /// EBUSY if already serving.
    pub fn snmalloc_profile_http_start(address: *const c_char, port: *mut u16) -> c_int;
    /// ESRCH if not serving.
    pub fn snmalloc_profile_http_stop() -> c_int;
    /// 0 when not serving.
    pub fn snmalloc_profile_http_port() -> u16;

    // Snapshot of the live samples.
    pub fn snmalloc_profile_snapshot_take(out: *mut *mut snmalloc_profile_snapshot) -> c_int;
    pub fn snmalloc_profile_snapshot_count(snapshot: *const snmalloc_profile_snapshot) -> usize;
    /// ERANGE for `i >= count`.
    pub fn snmalloc_profile_snapshot_get(
        snapshot: *const snmalloc_profile_snapshot,
        i: usize,
        out: *mut snmalloc_profile_sample,
    ) -> c_int;
    pub fn snmalloc_profile_snapshot_free(snapshot: *mut snmalloc_profile_snapshot);

    // Event stream.
    /// A buffer of `capacity` events, rounded up to a power of two.
    pub fn snmalloc_profile_events_start(capacity: usize) -> c_int;
    /// Copies up to `max` events out and returns how many; `*dropped_total`
    /// (if not null) receives the number dropped since `events_start`.
    pub fn snmalloc_profile_events_read(
        out: *mut snmalloc_profile_event,
        max: usize,
        dropped_total: *mut u64,
    ) -> usize;
    pub fn snmalloc_profile_events_stop() -> c_int;
}

// Allocator statistics (snmalloc_stats.h).

/// Small sizeclasses, 16 bytes to 64 KiB.
pub const SNMALLOC_STATS_SIZECLASSES: usize = 44;

/// One sizeclass's figures (`struct snmalloc_sizeclass_stats`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct snmalloc_sizeclass_stats {
    pub object_size: u64,
    pub live_objects: u64,
    pub slabs: u64,
    pub slab_bytes: u64,
}

/// The heap's figures (`struct snmalloc_stats`); see snmalloc_stats.h for
/// what each one counts.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct snmalloc_stats {
    pub live_bytes: u64,
    pub peak_live_bytes: u64,
    pub small_live_bytes: u64,
    pub large_live_bytes: u64,
    pub large_runs: u64,
    pub slab_bytes: u64,
    pub resident_bytes: u64,
    pub meta_bytes: u64,
    pub profiler_bytes: u64,
    pub profile_samples_dropped: u64,
    pub sizeclass_count: u64,
    pub sizeclasses: [snmalloc_sizeclass_stats; SNMALLOC_STATS_SIZECLASSES],
}

extern "C" {
    /// EINVAL for a null pointer.
    pub fn snmalloc_stats(out: *mut snmalloc_stats) -> c_int;
}
