//! Guarded sampling through the safe API: objects are guarded while a
//! correct program runs on unharmed, within the limit, and the errors of
//! `set_guard`.  (The reports of real bugs are tested by the C++ suite,
//! src/test/bugs/guard.)
//!
//! One test function: the profiler is per process.

mod common;

use common::on_fresh_thread;
use snmalloc_prof::profile::{self, Mode};
use snmalloc_prof::SnMalloc;

#[global_allocator]
static ALLOCATOR: SnMalloc = SnMalloc;

const EINVAL: i32 = 22;
const EBUSY: i32 = 16;

#[test]
fn guarded_objects_in_a_correct_program() {
    assert_eq!(
        profile::set_guard(1 << 17, 0).unwrap_err().raw_os_error(),
        Some(EINVAL)
    );
    // Every allocation sampled, at most 64 guarded at a time.
    profile::start_mode(Mode::SizeClass, 1).unwrap();
    profile::set_guard(64, 1_000_000).unwrap();
    let before = profile::guarded_total();
    let sum = on_fresh_thread(|| {
        let mut sum = 0u64;
        for round in 0..4u64 {
            // Each round holds 100 objects, more than the limit, of sizes
            // 1 .. 70000 bytes, and writes every byte of each.
            let held: Vec<Vec<u8>> = (0..100u64)
                .map(|i| vec![(i + round) as u8; 1 + ((i * 7919 + round * 31) % 70_000) as usize])
                .collect();
            sum += held.iter().map(|v| v.iter().map(|&b| b as u64).sum::<u64>()).sum::<u64>();
        }
        sum
    });
    let guarded = profile::guarded_total() - before;
    assert!(sum > 0);
    // Four rounds of 100: each round's first 64 small objects at least
    // (large ones are never guarded), the slots freed between rounds.
    assert!(guarded >= 4 * 32, "{} objects guarded", guarded);
    // The reservation was sized by the first limit: twice as many is EBUSY.
    assert_eq!(
        profile::set_guard(128, 0).unwrap_err().raw_os_error(),
        Some(EBUSY)
    );
    profile::set_guard(0, 0).unwrap();
    let off = profile::guarded_total();
    on_fresh_thread(|| drop(vec![1u8; 100]));
    assert_eq!(profile::guarded_total(), off);
    profile::stop().unwrap();
}
