//! A copy of the live samples, to walk at leisure.

use std::borrow::Borrow;
use std::io;
use std::iter::FusedIterator;
use std::mem::MaybeUninit;
use std::ptr::{self, NonNull};

use snmalloc_prof_sys as sys;

use super::{check, Sample};

/// The samples whose objects are live at one moment, copied out of the
/// profiler (taking it holds each thread's sample list locked only while
/// its records are copied).  Objects freed later stay in the snapshot.
///
/// ```no_run
/// # fn main() -> std::io::Result<()> {
/// let live: f64 = snmalloc_prof::profile::snapshot()?
///     .iter()
///     .map(|s| s.estimated_bytes())
///     .sum();
/// println!("about {live:.0} bytes live");
/// # Ok(())
/// # }
/// ```
pub struct Snapshot {
    raw: NonNull<sys::snmalloc_profile_snapshot>,
    len: usize,
}

// SAFETY: a snapshot is immutable once taken; the C functions that read it
// take it by const pointer and touch nothing else, so it may be read from
// and freed on any thread.
unsafe impl Send for Snapshot {}
unsafe impl Sync for Snapshot {}

/// Takes a [`Snapshot`] of the live samples.  Fails only when memory for
/// the copy cannot be had (`ENOMEM`).
pub fn snapshot() -> io::Result<Snapshot> {
    let mut raw = ptr::null_mut();
    // SAFETY: `raw` is a valid out pointer.
    check(unsafe { sys::snmalloc_profile_snapshot_take(&mut raw) })?;
    let raw = NonNull::new(raw).expect("snapshot_take succeeded without a snapshot");
    // SAFETY: `raw` is a live snapshot.
    let len = unsafe { sys::snmalloc_profile_snapshot_count(raw.as_ptr()) };
    Ok(Snapshot { raw, len })
}

impl Snapshot {
    /// How many samples it holds.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The `i`th sample, or `None` past the end.
    pub fn get(&self, i: usize) -> Option<Sample> {
        let mut out = MaybeUninit::uninit();
        // SAFETY: `self.raw` is live and `out` is a valid out pointer; the C
        // function fills `out` exactly when it returns 0.
        let code =
            unsafe { sys::snmalloc_profile_snapshot_get(self.raw.as_ptr(), i, out.as_mut_ptr()) };
        // SAFETY: see above.
        (code == 0).then(|| Sample::from_raw(unsafe { out.assume_init_ref() }))
    }

    /// The samples in order.
    pub fn iter(&self) -> SnapshotIter<&Snapshot> {
        SnapshotIter {
            snapshot: self,
            next: 0,
        }
    }
}

impl Drop for Snapshot {
    fn drop(&mut self) {
        // SAFETY: `self.raw` came from snapshot_take and is freed once.
        unsafe { sys::snmalloc_profile_snapshot_free(self.raw.as_ptr()) }
    }
}

impl std::fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Snapshot").field("len", &self.len).finish()
    }
}

/// Iterator over the samples of a [`Snapshot`], borrowed (`S` =
/// `&Snapshot`, from [`Snapshot::iter`]) or owned (`S` = `Snapshot`, from
/// `into_iter`, which frees the snapshot when dropped).
#[derive(Clone, Debug)]
pub struct SnapshotIter<S> {
    snapshot: S,
    next: usize,
}

impl<S: Borrow<Snapshot>> Iterator for SnapshotIter<S> {
    type Item = Sample;

    fn next(&mut self) -> Option<Sample> {
        let sample = self.snapshot.borrow().get(self.next)?;
        self.next += 1;
        Some(sample)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = self.snapshot.borrow().len.saturating_sub(self.next);
        (left, Some(left))
    }
}

impl<S: Borrow<Snapshot>> ExactSizeIterator for SnapshotIter<S> {}
impl<S: Borrow<Snapshot>> FusedIterator for SnapshotIter<S> {}

impl<'a> IntoIterator for &'a Snapshot {
    type Item = Sample;
    type IntoIter = SnapshotIter<&'a Snapshot>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl IntoIterator for Snapshot {
    type Item = Sample;
    type IntoIter = SnapshotIter<Snapshot>;

    fn into_iter(self) -> Self::IntoIter {
        SnapshotIter {
            snapshot: self,
            next: 0,
        }
    }
}
