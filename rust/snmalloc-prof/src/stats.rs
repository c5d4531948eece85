//! The allocator's statistics: live, peak, slab, resident and profiler
//! bytes, and live objects and slabs per sizeclass.  Available whether or
//! not profiling is on; counted on the allocator's slow paths only, so the
//! live figures are upper bounds exact at slab granularity (the C header
//! `snmalloc_stats.h` says exactly what each one counts).

use snmalloc_prof_sys as sys;

/// One sizeclass's figures.
pub type SizeclassStats = sys::snmalloc_sizeclass_stats;

/// The heap's figures, as [`stats`] returns them.
pub type Stats = sys::snmalloc_stats;

/// The heap's figures now, summed over every allocator.
pub fn stats() -> Stats {
    // SAFETY: every field is an integer, for which zero is a value; `out`
    // is a valid, writable snmalloc_stats.
    let mut out: Stats = unsafe { std::mem::zeroed() };
    let rc = unsafe { sys::snmalloc_stats(&mut out) };
    debug_assert_eq!(rc, 0, "snmalloc_stats with a valid pointer");
    out
}
