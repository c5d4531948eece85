//! One sampled object, as the raw snapshot and event stream report it.

use std::slice;

use snmalloc_prof_sys as sys;

use super::Mode;

/// A sampled object: where it is, how big, what it stands for, and the
/// stack that allocated it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sample {
    /// The object's address, as the allocation returned it.
    pub address: usize,
    /// The size that was asked for.
    pub requested_size: usize,
    /// The size the object occupies (its sizeclass), which the weight uses.
    pub allocated_size: usize,
    /// How many objects this sample stands for: in
    /// [`Mode::Bytes`], `1 / (1 - exp(-allocated_size / interval))`;
    /// `interval` in the other modes; 1 at interval 1.
    pub weight: f64,
    /// The sampling rate in force when the sample was taken: a mean
    /// interval in bytes, or a number of allocations (see [`Sample::mode`]).
    pub interval: usize,
    /// The mode the sample was taken in.
    pub mode: Mode,
    /// OS thread id (`gettid`) of the allocating thread.
    pub thread_id: u64,
    /// Wall clock (`CLOCK_REALTIME`) when sampled, in nanoseconds since the
    /// Unix epoch.
    pub time_ns: i64,
    /// Raw return addresses of the allocating stack, innermost first,
    /// starting in the caller of `malloc` (for a Rust allocation, the
    /// [`SnMalloc`](crate::SnMalloc) methods and `__rust_alloc` come first).
    /// Resolve them with `addr2line`, a symbolizer crate, or a pprof dump.
    pub frames: &'static [usize],
}

impl Sample {
    /// Unbiased estimate of the bytes this sample stands for:
    /// `weight * allocated_size`.
    pub fn estimated_bytes(&self) -> f64 {
        self.weight * self.allocated_size as f64
    }

    pub(crate) fn from_raw(raw: &sys::snmalloc_profile_sample) -> Self {
        let frames = if raw.frames.is_null() || raw.depth == 0 {
            &[][..]
        } else {
            // SAFETY: the C API guarantees `depth` addresses at `frames`,
            // kept in the stack table for the life of the process.
            unsafe { slice::from_raw_parts(raw.frames, raw.depth as usize) }
        };
        Sample {
            address: raw.address,
            requested_size: raw.requested_size,
            allocated_size: raw.allocated_size,
            weight: raw.weight,
            interval: raw.interval,
            mode: Mode::from_raw(raw.mode as i32),
            thread_id: raw.thread_id,
            time_ns: raw.time_ns,
            frames,
        }
    }
}
