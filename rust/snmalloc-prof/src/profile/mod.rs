//! Heap profiling: start and stop sampling, write pprof profiles, read the
//! raw samples.
//!
//! Sampling is byte-weighted by default: with a mean interval of R bytes,
//! each allocated byte is sampled with probability 1/R, so an object of `s`
//! bytes is sampled with probability `1 - exp(-s/R)` and a sampled object
//! stands for `1 / (1 - exp(-s/R))` objects.  [`start_mode`] chooses one of
//! the other [`Mode`]s, which count allocations instead of bytes.  The profile written by [`dump`]
//! already carries these unbiased estimates; [`Sample::weight`] gives them
//! for the raw samples.  There is one profiler per process: these functions
//! act on it from any thread.
//!
//! A dump is a gzipped pprof protobuf with the sample types `alloc_objects`,
//! `alloc_space`, `inuse_objects` and `inuse_space` (the default), read with
//!
//! ```text
//! go tool pprof -top -sample_index=inuse_space heap.pb.gz
//! go tool pprof -http=:8080 path/to/binary heap.pb.gz   # flame graph
//! ```

use std::ffi::CString;
use std::io;
use std::os::raw::c_int;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::io::{AsFd, AsRawFd};
use std::path::Path;

use snmalloc_prof_sys as sys;

mod events;
mod labels;
mod sample;
mod snapshot;

pub use events::{Drain, Event, EventKind, EventReader};
pub use labels::with_label;
pub use sample::Sample;
pub use snapshot::{snapshot, Snapshot, SnapshotIter};

/// The C API returns 0 or an errno value.
fn check(code: c_int) -> io::Result<()> {
    if code == 0 {
        Ok(())
    } else {
        Err(io::Error::from_raw_os_error(code))
    }
}

/// Starts sampling, one sample per `interval_bytes` allocated bytes on
/// average; 1 samples every allocation.  Calling it again while active
/// changes the interval; samples already taken keep the interval they were
/// taken with.  Threads pick the interval up at their next free-list
/// refill: objects already on a thread's free lists (at most a slab's worth
/// per size) are handed out unsampled first.  Threads started after `start`
/// sample from their first allocation.
///
/// Fails with `EINVAL` (`ErrorKind::InvalidInput`) for 0.
pub fn start(interval_bytes: usize) -> io::Result<()> {
    // SAFETY: plain value argument.
    check(unsafe { sys::snmalloc_profile_start(interval_bytes) })
}

/// How samples are chosen (docs/profiling.md, "Sampling modes").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mode {
    /// Poisson sample points on the allocated bytes, a mean interval of
    /// `rate` bytes apart (the default; 512 KiB).
    Bytes,
    /// Each allocation sampled with probability `1/rate`, whatever its
    /// size: which sites allocate most often (default rate 8192).
    Count,
    /// One sample in every `rate` allocations of each sizeclass, so every
    /// size is covered (default rate 8192).
    SizeClass,
}

impl Mode {
    fn raw(self) -> c_int {
        match self {
            Mode::Bytes => sys::SNMALLOC_PROFILE_MODE_BYTES,
            Mode::Count => sys::SNMALLOC_PROFILE_MODE_COUNT,
            Mode::SizeClass => sys::SNMALLOC_PROFILE_MODE_SIZECLASS,
        }
    }

    pub(crate) fn from_raw(raw: c_int) -> Mode {
        match raw {
            sys::SNMALLOC_PROFILE_MODE_COUNT => Mode::Count,
            sys::SNMALLOC_PROFILE_MODE_SIZECLASS => Mode::SizeClass,
            _ => Mode::Bytes,
        }
    }
}

/// Starts sampling in `mode` at `rate`: a mean interval of `rate` bytes in
/// [`Mode::Bytes`] (the same as [`start`]), `rate` allocations in the
/// others; 1 samples every allocation.  Samples already taken keep the
/// mode and rate they were taken with, so a dump stays unbiased across a
/// change.  Fails with `EINVAL` (`ErrorKind::InvalidInput`) for 0.
pub fn start_mode(mode: Mode, rate: usize) -> io::Result<()> {
    // SAFETY: plain value arguments.
    check(unsafe { sys::snmalloc_profile_start_mode(mode.raw(), rate) })
}

/// The mode of the last start ([`Mode::Bytes`] before any).
pub fn mode() -> Mode {
    // SAFETY: no arguments.
    Mode::from_raw(unsafe { sys::snmalloc_profile_mode() })
}

/// Guarded sampling (docs/profiling.md, "Catching memory bugs in
/// production with guarded sampling"): at most `limit` sampled objects are
/// placed against inaccessible pages at a time (0 turns it off), at most
/// `per_second` new ones a second (0: the default, 1000), so an overflow,
/// underflow or use after free of one faults at once and is reported on
/// stderr with its allocating and freeing stacks.  Needs sampling started
/// ([`start`], [`start_mode`]; [`Mode::SizeClass`] guards every size alike).
///
/// Call it from `main`, not through `SNMALLOC_PROFILE`: Rust's runtime
/// installs its own SIGSEGV handler (for stack overflows) after the
/// allocator reads the environment, which would hide the reports; the
/// handler installed here chains to Rust's.  Errors: `EINVAL` for a limit
/// over 65536, `EBUSY` for one over the reservation the first limit made.
pub fn set_guard(limit: usize, per_second: usize) -> io::Result<()> {
    // SAFETY: plain value arguments.
    check(unsafe { sys::snmalloc_profile_set_guard(limit, per_second) })
}

/// How many objects have been guarded since the process started.
pub fn guarded_total() -> u64 {
    // SAFETY: no arguments.
    unsafe { sys::snmalloc_profile_guarded_total() }
}

/// Stops taking samples.  Samples already taken stay in the profile until
/// their objects are freed, so a dump after `stop` still shows what they hold.
pub fn stop() -> io::Result<()> {
    // SAFETY: no arguments.
    check(unsafe { sys::snmalloc_profile_stop() })
}

/// Whether samples are being taken.
pub fn is_active() -> bool {
    // SAFETY: no arguments.
    unsafe { sys::snmalloc_profile_is_active() != 0 }
}

/// Sets how many frames of each allocating stack are recorded, 1 to 256
/// (default 64); `EINVAL` outside that range.
pub fn set_max_depth(depth: usize) -> io::Result<()> {
    // SAFETY: plain value argument.
    check(unsafe { sys::snmalloc_profile_set_max_depth(depth) })
}

/// Writes a gzipped pprof heap profile of the live sampled objects (and of
/// everything sampled so far) to `path`.  The file is written under a
/// temporary name and renamed into place, so no reader sees half a profile.
/// Safe while other threads allocate and free.
///
/// Errors carry the errno of what failed (`ENOENT` for a missing directory,
/// `EACCES`, `ENOSPC`, ...); a path with a NUL byte is `InvalidInput`.
pub fn dump(path: impl AsRef<Path>) -> io::Result<()> {
    let path = c_path(path.as_ref())?;
    // SAFETY: `path` is a valid NUL-terminated string for the call.
    check(unsafe { sys::snmalloc_profile_dump(path.as_ptr()) })
}

fn c_path(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains a NUL byte"))
}

/// Writes the same profile as [`dump`] to an open file descriptor (a file, a
/// pipe, a socket), from its current position; the descriptor stays open.
pub fn dump_fd(fd: impl AsFd) -> io::Result<()> {
    // SAFETY: the descriptor is open for the duration of the borrow.
    check(unsafe { sys::snmalloc_profile_dump_fd(fd.as_fd().as_raw_fd()) })
}

/// Writes the peak-heap profile to `path`, as [`dump`] does: the live heap
/// as it was when the estimated live heap was highest (within a 32nd of
/// it, plus sampling error).  Its alloc_* figures are those of now.
pub fn dump_peak(path: impl AsRef<Path>) -> io::Result<()> {
    let path = c_path(path.as_ref())?;
    // SAFETY: `path` is a valid NUL-terminated string for the call.
    check(unsafe { sys::snmalloc_profile_dump_peak(path.as_ptr()) })
}

/// Writes the footprint profile to `path`, as [`dump`] does: the process's
/// resident memory (VmRSS, within a few percent) in one table, sample types
/// `resident_space` and `slab_waste_space`: the sampled live heap by site,
/// each object counted by its resident pages; the allocator's own memory as
/// frames named `snmalloc: ...`; the rest of the process by mapping
/// (`[binary: name]`, `[stack]`, ...).
pub fn dump_footprint(path: impl AsRef<Path>) -> io::Result<()> {
    let path = c_path(path.as_ref())?;
    // SAFETY: `path` is a valid NUL-terminated string for the call.
    check(unsafe { sys::snmalloc_profile_dump_footprint(path.as_ptr()) })
}

/// Writes the footprint profile to an open file descriptor, as [`dump_fd`].
pub fn dump_footprint_fd(fd: impl AsFd) -> io::Result<()> {
    // SAFETY: the descriptor is open for the duration of the borrow.
    check(unsafe { sys::snmalloc_profile_dump_footprint_fd(fd.as_fd().as_raw_fd()) })
}

/// Writes the lifetime profile to `path`, as [`dump`] does: per allocation
/// site, the sampled objects freed since the process started
/// (`freed_objects`, `lifetime` in nanoseconds, labels `lifetime=<1us` ..
/// `>=1h` and `freed_by=same_thread|other_thread`) and those alive now
/// (`live_objects`, `live_age`, label `age=...`), weighted like the heap
/// profile.  `go tool pprof -mean` gives the mean lifetime per site.
pub fn dump_lifetimes(path: impl AsRef<Path>) -> io::Result<()> {
    let path = c_path(path.as_ref())?;
    // SAFETY: `path` is a valid NUL-terminated string for the call.
    check(unsafe { sys::snmalloc_profile_dump_lifetimes(path.as_ptr()) })
}

/// Writes the lifetime profile to an open file descriptor, as [`dump_fd`].
pub fn dump_lifetimes_fd(fd: impl AsFd) -> io::Result<()> {
    // SAFETY: the descriptor is open for the duration of the borrow.
    check(unsafe { sys::snmalloc_profile_dump_lifetimes_fd(fd.as_fd().as_raw_fd()) })
}

/// Starts profiling and the dumps it should make, with the text the
/// `SNMALLOC_PROFILE` variable takes, e.g. `"rate=1m,dump_every=4g,keep=10"`
/// (docs/profiling.md lists the keys; sizes take k, m and g suffixes).
/// Automatic dumps are written by the allocator's helper thread.  Bad text
/// is `InvalidInput` (and one line on stderr) and changes nothing.
pub fn configure(settings: &str) -> io::Result<()> {
    let settings = CString::new(settings)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "settings contain a NUL byte"))?;
    // SAFETY: `settings` is a valid NUL-terminated string for the call.
    check(unsafe { sys::snmalloc_profile_configure(settings.as_ptr()) })
}

/// Writes the peak-heap profile to an open file descriptor, as [`dump_fd`].
pub fn dump_peak_fd(fd: impl AsFd) -> io::Result<()> {
    // SAFETY: the descriptor is open for the duration of the borrow.
    check(unsafe { sys::snmalloc_profile_dump_peak_fd(fd.as_fd().as_raw_fd()) })
}

/// Serves the profiles and statistics over HTTP at `address` until
/// [`http_stop`] or exit, from a thread of the allocator's own:
/// `/debug/pprof/heap`, `/debug/pprof/allocs`, `/debug/pprof/peak` and
/// `/debug/pprof/lifetimes` (gzipped pprof, read by `go tool pprof URL`,
/// Pyroscope and Parca; heap, allocs and lifetimes take `?seconds=N`), and `/metrics` (Prometheus text).
/// `address` is `"host:port"` with a numeric host: `"127.0.0.1:6060"`,
/// `":0"` (loopback, any free port); a non-loopback address is served with
/// a warning on stderr.  Returns the port.
///
/// Errors: `InvalidInput` for a bad address, `EBUSY` if already serving,
/// else the errno of bind/listen (`AddrInUse`, ...).
pub fn http_start(address: &str) -> io::Result<u16> {
    let address = CString::new(address)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "address contains a NUL byte"))?;
    let mut port = 0u16;
    // SAFETY: `address` is a valid NUL-terminated string and `port` a valid
    // u16 for the call.
    check(unsafe { sys::snmalloc_profile_http_start(address.as_ptr(), &mut port) })?;
    Ok(port)
}

/// Stops serving (connections are closed, the thread joined); `ESRCH` if
/// not serving.
pub fn http_stop() -> io::Result<()> {
    // SAFETY: no arguments.
    check(unsafe { sys::snmalloc_profile_http_stop() })
}

/// The port served on, if serving.
pub fn http_port() -> Option<u16> {
    // SAFETY: no arguments.
    match unsafe { sys::snmalloc_profile_http_port() } {
        0 => None,
        port => Some(port),
    }
}
