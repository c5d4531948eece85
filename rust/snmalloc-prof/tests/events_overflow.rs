//! A reader that does not keep up loses events, counted, and never holds
//! up the allocating thread; once drained, the stream flows again.
//!
//! Its own test binary: the profiler and the event stream are per process.

mod common;

use common::{allocate_tracked, now_ns, on_fresh_thread, taken_during, thread_id, Tracked};
use snmalloc_prof::profile::{self, EventKind, EventReader};
use snmalloc_prof::SnMalloc;

#[global_allocator]
static ALLOCATOR: SnMalloc = SnMalloc;

const CAPACITY: usize = 16;
const ALLOCATED: usize = 10_000;

#[test]
fn a_full_buffer_drops_and_counts_events() {
    let mut reader = EventReader::start(CAPACITY).unwrap();
    profile::start(1).unwrap();
    // 10,000 sampled allocations with nobody reading: all but the first
    // few events find the buffer full.
    let objects = on_fresh_thread(|| {
        let mut objects = Vec::with_capacity(ALLOCATED);
        allocate_tracked(ALLOCATED, &mut objects);
        objects
    });

    let buffered = reader.drain().count();
    let dropped = reader.dropped();
    println!("{buffered} events read, {dropped} dropped");
    assert!(
        buffered <= CAPACITY,
        "{buffered} events from a buffer of {CAPACITY}"
    );
    assert!(
        buffered as u64 + dropped >= ALLOCATED as u64,
        "{ALLOCATED} births, {buffered} read and {dropped} dropped"
    );
    // Empty now: draining again returns at once with nothing (or only
    // what other threads sampled meanwhile).
    assert!(reader.drain().count() <= CAPACITY);

    // The stream recovers: a new birth is read, and the drop count stays.
    let (marker, tid, start_ns, end_ns) = on_fresh_thread(|| {
        let mut marker = Vec::with_capacity(1);
        let start_ns = now_ns();
        allocate_tracked(1, &mut marker);
        (marker, thread_id(), start_ns, now_ns())
    });
    let marker_address = marker[0].address();
    let seen = reader.drain().any(|e| {
        e.kind == EventKind::Alloc
            && e.sample.address == marker_address
            && taken_during(&e.sample, tid, start_ns, end_ns)
    });
    assert!(seen, "the birth after draining was not in the stream");
    assert!(reader.dropped() >= dropped);

    profile::stop().unwrap();
    drop(reader);
    objects.into_iter().chain(marker).for_each(Tracked::free);
}
