//! At interval 1 every allocation is sampled: the event stream shows one
//! birth per object and one death per freed object, in order, each death
//! carrying its birth's sample.
//!
//! Its own test binary: the profiler and the event stream are per process.

mod common;

use std::collections::HashMap;

use common::{
    allocate_tracked, now_ns, on_fresh_thread, stack_passes_through_allocate_tracked, taken_during,
    thread_id, Tracked,
};
use snmalloc_prof::profile::{self, Event, EventKind, EventReader, Sample};
use snmalloc_prof::SnMalloc;

#[global_allocator]
static ALLOCATOR: SnMalloc = SnMalloc;

const ALLOCATED: usize = 1000;
const FREED: usize = 400;

struct Outcome {
    live: Vec<Tracked>,
    /// Address and requested size of each freed object.
    freed: Vec<(usize, usize)>,
    thread_id: u64,
    start_ns: i64,
    end_ns: i64,
}

/// Allocates ALLOCATED objects and frees the first FREED of them, and
/// between `start_ns` and `end_ns` allocates nothing else.
fn allocate_and_free_some() -> Outcome {
    let mut objects = Vec::with_capacity(ALLOCATED);
    let mut freed = Vec::with_capacity(FREED);
    let start_ns = now_ns();
    allocate_tracked(ALLOCATED, &mut objects);
    for object in objects.drain(..FREED) {
        freed.push((object.address(), object.layout.size()));
        object.free();
    }
    let end_ns = now_ns();
    Outcome {
        live: objects,
        freed,
        thread_id: thread_id(),
        start_ns,
        end_ns,
    }
}

#[test]
fn stream_shows_every_birth_and_death() {
    let mut reader = EventReader::start(1 << 16).unwrap();
    // Room for the whole buffer: collecting the events allocates nothing.
    let mut events: Vec<Event> = Vec::with_capacity(1 << 16);
    profile::start(1).unwrap();
    let outcome = on_fresh_thread(allocate_and_free_some);
    profile::stop().unwrap();
    events.extend(reader.drain());
    assert_eq!(reader.dropped(), 0);

    // The stream holds other threads' events too.  Every event carries the
    // sample taken at the object's birth, so these are the births and
    // deaths of exactly the objects born in our stretch of work.
    let mut births: HashMap<usize, Vec<(usize, Sample)>> = HashMap::new();
    let mut deaths: HashMap<usize, Vec<(usize, Sample)>> = HashMap::new();
    for (position, event) in events.iter().enumerate() {
        if !taken_during(
            &event.sample,
            outcome.thread_id,
            outcome.start_ns,
            outcome.end_ns,
        ) {
            continue;
        }
        let by_kind = match event.kind {
            EventKind::Alloc => &mut births,
            EventKind::Free => &mut deaths,
        };
        by_kind
            .entry(event.sample.address)
            .or_default()
            .push((position, event.sample));
    }
    if births.len() != ALLOCATED {
        // Say where the missing births went: no event at all, another
        // thread's, or outside the window by how much.
        let tracked = outcome
            .live
            .iter()
            .map(Tracked::address)
            .chain(outcome.freed.iter().map(|&(address, _)| address));
        for address in tracked.filter(|a| !births.contains_key(a)) {
            let seen: Vec<String> = events
                .iter()
                .filter(|e| e.kind == EventKind::Alloc && e.sample.address == address)
                .map(|e| {
                    format!(
                        "thread {} (ours {}), {} ns after the window's start",
                        e.sample.thread_id,
                        outcome.thread_id,
                        e.sample.time_ns - outcome.start_ns
                    )
                })
                .collect();
            eprintln!("no birth in the window for {address:#x}: {seen:?}");
        }
    }
    assert_eq!(births.len(), ALLOCATED, "births at distinct addresses");
    assert_eq!(deaths.len(), FREED, "deaths at distinct addresses");

    let live = outcome.live.iter().map(|o| (o.address(), o.layout.size()));
    for (address, size) in live.chain(outcome.freed.iter().copied()) {
        let born = births.get(&address).map(Vec::as_slice).unwrap_or(&[]);
        assert_eq!(
            born.len(),
            1,
            "object at {address:#x} born {} times",
            born.len()
        );
        let sample = born[0].1;
        assert_eq!(sample.requested_size, size);
        assert_eq!(sample.interval, 1);
        assert!(
            stack_passes_through_allocate_tracked(sample.frames),
            "stack {:x?}",
            sample.frames
        );
    }
    for object in &outcome.live {
        assert!(
            !deaths.contains_key(&object.address()),
            "live object at {:#x} died",
            object.address()
        );
    }
    for &(address, _) in &outcome.freed {
        let died = deaths.get(&address).map(Vec::as_slice).unwrap_or(&[]);
        assert_eq!(
            died.len(),
            1,
            "freed object at {address:#x} died {} times",
            died.len()
        );
        let (birth_position, birth) = births[&address][0];
        let (death_position, death) = died[0];
        assert!(
            birth_position < death_position,
            "death before birth at {address:#x}"
        );
        assert_eq!(death, birth);
    }

    drop(reader);
    outcome.live.into_iter().for_each(Tracked::free);
}
