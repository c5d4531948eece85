//! At interval 1 every allocation is sampled: a snapshot holds exactly the
//! live objects, each with its sizes, weight 1, thread, time and stack.
//!
//! Its own test binary: the profiler is per process.

mod common;

use std::collections::HashMap;

use common::{
    allocate_tracked, now_ns, on_fresh_thread, stack_passes_through_allocate_tracked, taken_during,
    thread_id, Tracked,
};
use snmalloc_prof::profile::{self, Sample, Snapshot};
use snmalloc_prof::SnMalloc;

#[global_allocator]
static ALLOCATOR: SnMalloc = SnMalloc;

const ALLOCATED: usize = 1000;

struct Outcome {
    live: Vec<Tracked>,
    freed_addresses: Vec<usize>,
    snapshot: Snapshot,
    thread_id: u64,
    start_ns: i64,
    end_ns: i64,
}

/// Allocates ALLOCATED objects, frees every third, and takes a snapshot.
/// Between `start_ns` and `end_ns` the thread allocates nothing else, and
/// nothing at all from the frees to the snapshot, so no freed address can
/// be taken again by a sampled object.
fn allocate_free_and_snapshot() -> Outcome {
    let mut objects = Vec::with_capacity(ALLOCATED);
    let mut live = Vec::with_capacity(ALLOCATED);
    let mut freed_addresses = Vec::with_capacity(ALLOCATED);
    let start_ns = now_ns();
    allocate_tracked(ALLOCATED, &mut objects);
    for (i, object) in objects.drain(..).enumerate() {
        if i % 3 == 0 {
            freed_addresses.push(object.address());
            object.free();
        } else {
            live.push(object);
        }
    }
    let end_ns = now_ns();
    let snapshot = profile::snapshot().unwrap();
    Outcome {
        live,
        freed_addresses,
        snapshot,
        thread_id: thread_id(),
        start_ns,
        end_ns,
    }
}

#[test]
fn snapshot_holds_exactly_the_live_objects() {
    profile::start(1).unwrap();
    let outcome = on_fresh_thread(allocate_free_and_snapshot);
    profile::stop().unwrap();

    // The snapshot holds other threads' samples too; these are ours.
    let mut ours: HashMap<usize, Vec<Sample>> = HashMap::new();
    for sample in &outcome.snapshot {
        if taken_during(&sample, outcome.thread_id, outcome.start_ns, outcome.end_ns) {
            ours.entry(sample.address).or_default().push(sample);
        }
    }
    assert_eq!(
        ours.len(),
        outcome.live.len(),
        "live samples at distinct addresses"
    );
    for object in &outcome.live {
        let samples = ours
            .get(&object.address())
            .map(Vec::as_slice)
            .unwrap_or(&[]);
        assert_eq!(
            samples.len(),
            1,
            "live object of {} bytes at {:#x} sampled {} times",
            object.layout.size(),
            object.address(),
            samples.len()
        );
        let s = &samples[0];
        assert_eq!(s.requested_size, object.layout.size());
        assert_eq!(s.allocated_size, object.allocated_size());
        assert!(s.allocated_size >= s.requested_size);
        assert_eq!(s.interval, 1);
        // 1 / (1 - exp(-s)) for s >= 16 bytes is 1 to within 1e-6.
        assert!((s.weight - 1.0).abs() < 1e-6, "weight {}", s.weight);
        assert!(
            stack_passes_through_allocate_tracked(s.frames),
            "stack {:x?}",
            s.frames
        );
    }
    for address in &outcome.freed_addresses {
        assert!(
            !ours.contains_key(address),
            "freed object at {address:#x} is in the snapshot"
        );
    }

    let snapshot = outcome.snapshot;
    assert!(snapshot.get(snapshot.len()).is_none());
    assert_eq!(snapshot.iter().len(), snapshot.len());
    let count = snapshot.len();
    assert_eq!(snapshot.into_iter().count(), count);

    outcome.live.into_iter().for_each(Tracked::free);
}
