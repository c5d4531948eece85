//! Allocation labels: key/value pairs that mark the calling thread's
//! allocations in every profile, for `go tool pprof -tagfocus`.

use std::ffi::CString;
use std::os::raw::c_int;

use snmalloc_prof_sys as sys;

/// Linux's EINVAL: the push was refused, there is nothing to pop.
const EINVAL: c_int = 22;

/// Pops the label it pushed when dropped, also when `f` unwinds.
struct Pushed(bool);

impl Drop for Pushed {
    fn drop(&mut self) {
        if self.0 {
            // SAFETY: no arguments; pops the label this guard pushed.
            unsafe { sys::snmalloc_profile_label_pop() };
        }
    }
}

/// The text before any NUL byte, as C reads it.
fn c_text(text: &str) -> CString {
    let end = text.find('\0').unwrap_or(text.len());
    CString::new(&text[..end]).expect("no NUL byte before `end`")
}

/// Runs `f` with the label `key=value` on the allocations this thread
/// makes meanwhile; heap, allocs, peak and lifetime profiles carry it as a
/// pprof string label (`go tool pprof -tagfocus=tenant=acme`,
/// `-tagshow=tenant`).  Calls nest: an inner label of the same key hides
/// the outer one.  An object keeps its labels whichever thread drops it.
///
/// At most 8 labels are kept at once and keys and values are cut to 64
/// bytes (the profile counts the samples that lost any); a key or value is
/// also cut at a NUL byte; an empty key labels nothing.
///
/// ```no_run
/// let order = snmalloc_prof::profile::with_label("tenant", "acme", || vec![0u8; 1 << 20]);
/// # drop(order);
/// ```
pub fn with_label<R>(key: &str, value: &str, f: impl FnOnce() -> R) -> R {
    let (key, value) = (c_text(key), c_text(value));
    // SAFETY: both are valid NUL-terminated strings, and stay so until the
    // pop: the profiler keeps the pointers, and `_pushed`, declared after
    // them, is dropped (pops) before they are.
    let code = unsafe { sys::snmalloc_profile_label_push(key.as_ptr(), value.as_ptr()) };
    let _pushed = Pushed(code != EINVAL);
    f()
}
