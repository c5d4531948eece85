//! The stream of births and deaths of sampled objects.

use std::io;
use std::iter::FusedIterator;
use std::ptr;
use std::sync::atomic::{AtomicBool, Ordering};

use snmalloc_prof_sys as sys;

use super::{check, Sample};

/// Whether a sampled object was allocated or freed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EventKind {
    Alloc,
    Free,
}

/// One birth or death of a sampled object.  A `Free` carries the same
/// sample as the object's `Alloc`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Event {
    pub kind: EventKind,
    pub sample: Sample,
}

impl Event {
    fn from_raw(raw: &sys::snmalloc_profile_event) -> Self {
        let kind = match raw.kind {
            sys::SNMALLOC_PROFILE_EVENT_ALLOC => EventKind::Alloc,
            sys::SNMALLOC_PROFILE_EVENT_FREE => EventKind::Free,
            other => unreachable!("unknown snmalloc profile event kind {other}"),
        };
        Event {
            kind,
            sample: Sample::from_raw(&raw.sample),
        }
    }
}

/// The C side has one event buffer and one reader; this keeps a second
/// `EventReader` from replacing or stopping the first one's buffer.
static READER_EXISTS: AtomicBool = AtomicBool::new(false);

/// Events copied out of the C buffer per call.
const BATCH: usize = 256;

/// Receives the births and deaths of sampled objects as they happen.
///
/// The allocator writes events into a bounded buffer and never waits: when
/// the buffer is full, new events are dropped and counted ([`dropped`]).
/// Read often enough, or with a buffer large enough, to keep up.  Events
/// flow only while sampling is on ([`start`](super::start)); at interval 1
/// every allocation and free is an event.  Dropping the reader stops the
/// stream.
///
/// ```no_run
/// use snmalloc_prof::profile::{self, EventKind, EventReader};
/// # fn main() -> std::io::Result<()> {
/// let mut reader = EventReader::start(1 << 16)?;
/// profile::start(64 * 1024)?;
/// // ... run the workload, and now and then:
/// for event in reader.drain() {
///     if event.kind == EventKind::Alloc {
///         println!("{} bytes at {:#x}", event.sample.requested_size, event.sample.address);
///     }
/// }
/// println!("{} events lost", reader.dropped());
/// # Ok(())
/// # }
/// ```
///
/// [`dropped`]: EventReader::dropped
#[derive(Debug)]
pub struct EventReader {
    /// Events read from the C buffer; those from `next` on are not yet taken.
    batch: Vec<sys::snmalloc_profile_event>,
    next: usize,
    capacity: usize,
}

impl EventReader {
    /// Starts the stream with a buffer of `capacity` events (rounded up to a
    /// power of two).  `AlreadyExists` if another reader is alive,
    /// `InvalidInput` for 0 or a capacity over 2^30, `ENOMEM` if the buffer
    /// cannot be had.
    pub fn start(capacity: usize) -> io::Result<EventReader> {
        if READER_EXISTS.swap(true, Ordering::AcqRel) {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                "an EventReader is already reading",
            ));
        }
        // Allocated before the stream starts, so not an event of its own.
        let batch = Vec::with_capacity(BATCH);
        // SAFETY: plain value argument.
        if let Err(e) = check(unsafe { sys::snmalloc_profile_events_start(capacity) }) {
            READER_EXISTS.store(false, Ordering::Release);
            return Err(e);
        }
        Ok(EventReader {
            batch,
            next: 0,
            capacity: capacity.next_power_of_two(),
        })
    }

    /// Takes the events buffered so far, oldest first, without waiting for
    /// more.  To end even while threads (or the loop body) keep allocating,
    /// one call takes at most about the buffer's capacity; the rest waits
    /// for the next call.  Events the iterator was not asked for (after a
    /// `take(n)`, say) stay for the next call.
    pub fn drain(&mut self) -> Drain<'_> {
        let budget = self.capacity;
        Drain {
            reader: self,
            budget,
            exhausted: false,
        }
    }

    /// Events dropped since [`start`](Self::start) because the buffer was full.
    pub fn dropped(&self) -> u64 {
        let mut dropped = 0;
        // SAFETY: reading zero events; `dropped` is a valid out pointer.
        unsafe { sys::snmalloc_profile_events_read(ptr::null_mut(), 0, &mut dropped) };
        dropped
    }

    /// Refills `batch` with up to `max` events; how many came.
    fn read_batch(&mut self, max: usize) -> usize {
        self.batch.clear();
        self.next = 0;
        let max = max.min(self.batch.capacity());
        // SAFETY: `batch` has room for `max` events; the C side writes the
        // count it returns, which is at most `max`.
        unsafe {
            let n =
                sys::snmalloc_profile_events_read(self.batch.as_mut_ptr(), max, ptr::null_mut());
            self.batch.set_len(n);
            n
        }
    }
}

impl Drop for EventReader {
    fn drop(&mut self) {
        // SAFETY: no arguments; stopping cannot fail (it returns 0).
        unsafe { sys::snmalloc_profile_events_stop() };
        READER_EXISTS.store(false, Ordering::Release);
    }
}

/// Iterator over buffered events, from [`EventReader::drain`].
#[derive(Debug)]
pub struct Drain<'a> {
    reader: &'a mut EventReader,
    budget: usize,
    exhausted: bool,
}

impl Iterator for Drain<'_> {
    type Item = Event;

    fn next(&mut self) -> Option<Event> {
        let reader = &mut *self.reader;
        if reader.next == reader.batch.len() {
            if self.exhausted || self.budget == 0 {
                return None;
            }
            let want = self.budget.min(BATCH);
            let got = reader.read_batch(want);
            self.budget -= got;
            // A short read means the buffer is empty.
            self.exhausted = got < want;
            if got == 0 {
                return None;
            }
        }
        let event = Event::from_raw(&reader.batch[reader.next]);
        reader.next += 1;
        Some(event)
    }
}

impl FusedIterator for Drain<'_> {}
