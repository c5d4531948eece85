//! The count and sizeclass sampling modes through the safe API: the mode
//! and rate each sample carries, its weight, and how many samples a known
//! number of allocations gets.
//!
//! One test function: the profiler is per process.

mod common;

use common::{now_ns, on_fresh_thread, taken_during, thread_id};
use snmalloc_prof::profile::{self, Mode};
use snmalloc_prof::SnMalloc;

#[global_allocator]
static ALLOCATOR: SnMalloc = SnMalloc;

const EINVAL: i32 = 22;
const OBJECTS: usize = 8000;
const SIZE: usize = 48;

/// Allocates OBJECTS boxes of SIZE bytes on a fresh thread; returns them
/// (still live) with the samples that thread took meanwhile.
fn sampled_allocations() -> (Vec<Box<[u8; SIZE]>>, Vec<profile::Sample>) {
    on_fresh_thread(|| {
        let mut boxes = Vec::with_capacity(OBJECTS);
        let start = now_ns();
        for i in 0..OBJECTS {
            boxes.push(Box::new([i as u8; SIZE]));
        }
        let end = now_ns();
        let me = thread_id();
        let samples = profile::snapshot()
            .unwrap()
            .iter()
            .filter(|s| taken_during(s, me, start, end) && s.requested_size == SIZE)
            .collect();
        (boxes, samples)
    })
}

#[test]
fn count_and_sizeclass_modes() {
    assert_eq!(
        profile::start_mode(Mode::Count, 0).unwrap_err().raw_os_error(),
        Some(EINVAL)
    );

    // Count mode at N = 8: each allocation with probability 1/8, so the
    // number sampled is Binomial(8000, 1/8): mean 1000, sd 29.6.  Five sd
    // either side fail falsely about once in 3 million runs.
    profile::start_mode(Mode::Count, 8).unwrap();
    assert_eq!(profile::mode(), Mode::Count);
    let (boxes, samples) = sampled_allocations();
    for s in &samples {
        assert_eq!(s.mode, Mode::Count);
        assert_eq!(s.interval, 8);
        assert_eq!(s.weight, 8.0);
    }
    let k = samples.len() as f64;
    assert!((k - 1000.0).abs() <= 5.0 * 29.6, "{} samples in count mode", k);
    drop(boxes);

    // Sizeclass mode at N = 10: one allocation in every block of ten of the
    // class is sampled, so 8000 allocations in one run have 800 samples,
    // give or take the blocks cut at either end and the profiler's own
    // allocations of the class.
    profile::start_mode(Mode::SizeClass, 10).unwrap();
    assert_eq!(profile::mode(), Mode::SizeClass);
    let (boxes, samples) = sampled_allocations();
    for s in &samples {
        assert_eq!(s.mode, Mode::SizeClass);
        assert_eq!(s.weight, 10.0);
    }
    let k = samples.len() as f64;
    assert!((k - 800.0).abs() <= 2.0 + 0.02 * 800.0, "{} samples in sizeclass mode", k);
    drop(boxes);

    // The same through the configuration text; start() is bytes mode again.
    profile::configure("mode=count,rate=64").unwrap();
    assert_eq!(profile::mode(), Mode::Count);
    profile::start(1 << 20).unwrap();
    assert_eq!(profile::mode(), Mode::Bytes);
    profile::stop().unwrap();
}
