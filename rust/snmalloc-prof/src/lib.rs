//! The snmalloc-prof allocator for Rust, with heap profiling built in.
//!
//! Depending on this crate links the allocator (built with
//! `SNMALLOC_PROFILE=ON` from this repository by `snmalloc-prof-sys`) into the
//! binary, where its `malloc` and `free` replace the C library's for the whole
//! process.  [`SnMalloc`] routes Rust's allocations to it as well:
//!
//! ```no_run
//! #[global_allocator]
//! static ALLOCATOR: snmalloc_prof::SnMalloc = snmalloc_prof::SnMalloc;
//!
//! fn main() -> std::io::Result<()> {
//!     snmalloc_prof::profile::start(512 * 1024)?; // one sample per 512 KiB on average
//!     let held: Vec<Vec<u8>> = (0..1024).map(|_| vec![1u8; 64 * 1024]).collect();
//!     snmalloc_prof::profile::dump("heap.pb.gz")?; // go tool pprof -top heap.pb.gz
//!     drop(held);
//!     Ok(())
//! }
//! ```
//!
//! [`profile`] starts and stops sampling, writes pprof heap profiles, and
//! gives the raw samples: a [`profile::snapshot`] of the live ones and an
//! [`profile::EventReader`] stream of births and deaths.  [`stats()`]
//! gives the allocator's statistics (live and peak bytes, per sizeclass).

use std::alloc::{GlobalAlloc, Layout};
use std::ffi::{c_void, CStr};
use std::ptr;

use snmalloc_prof_sys as sys;

pub mod profile;
pub mod stats;

pub use stats::stats;

/// Every object the allocator hands out is aligned to at least this many
/// bytes (its smallest sizeclass is 16 bytes and objects are naturally
/// aligned), so `malloc` serves any layout whose alignment is at most this.
const MALLOC_ALIGNMENT: usize = 16;

/// The snmalloc-prof allocator as a Rust [`GlobalAlloc`].
///
/// Allocations whose alignment is at most 16 bytes go through `malloc`,
/// `calloc` and `realloc`; larger alignments through `aligned_alloc`.  They
/// are the same `malloc` and `free` that C and C++ code in the process use,
/// so a heap profile shows Rust and C allocations together.
#[derive(Clone, Copy, Debug, Default)]
pub struct SnMalloc;

unsafe impl GlobalAlloc for SnMalloc {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if layout.align() <= MALLOC_ALIGNMENT {
            sys::malloc(layout.size()).cast()
        } else {
            sys::aligned_alloc(layout.align(), layout.size()).cast()
        }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if layout.align() <= MALLOC_ALIGNMENT {
            return sys::calloc(1, layout.size()).cast();
        }
        let p = self.alloc(layout);
        if !p.is_null() {
            ptr::write_bytes(p, 0, layout.size());
        }
        p
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        sys::free(ptr.cast());
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if layout.align() <= MALLOC_ALIGNMENT {
            return sys::realloc(ptr.cast(), new_size).cast();
        }
        // realloc keeps only malloc's alignment: move by hand.
        let new_layout = Layout::from_size_align_unchecked(new_size, layout.align());
        let q = self.alloc(new_layout);
        if !q.is_null() {
            ptr::copy_nonoverlapping(ptr, q, layout.size().min(new_size));
            sys::free(ptr.cast());
        }
        q
    }
}

/// The allocator's name as it reports it, `"snmalloc"`: proof that the
/// allocator of this crate is linked in.
pub fn identity() -> &'static str {
    // SAFETY: snmalloc_identity returns a static NUL-terminated ASCII string.
    unsafe { CStr::from_ptr(sys::snmalloc_identity()) }
        .to_str()
        .expect("snmalloc_identity is ASCII")
}

/// The usable size of an allocation (at least what was asked for), or 0 if
/// `ptr` is not memory of this allocator.  This is `malloc_usable_size`.
///
/// # Safety
///
/// `ptr` must be null, an address this allocator returned and that is not
/// yet freed, or an address outside this allocator's memory.
pub unsafe fn usable_size(ptr: *const u8) -> usize {
    sys::malloc_usable_size(ptr as *mut c_void)
}
