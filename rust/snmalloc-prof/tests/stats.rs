//! stats(): the figures against what the test holds, with objects freed by
//! another thread than the one that allocated them.

use snmalloc_prof::SnMalloc;

#[global_allocator]
static ALLOCATOR: SnMalloc = SnMalloc;

#[test]
fn stats_follow_what_is_held() {
    // Large runs are counted exactly: 8 of 1 MiB + 1 (one chunk more each).
    let run = (1usize << 20) + (16 << 10);
    let before = snmalloc_prof::stats();
    let held: Vec<Vec<u8>> = (0..8).map(|_| vec![1u8; (1 << 20) + 1]).collect();
    let during = snmalloc_prof::stats();
    assert_eq!(during.large_runs - before.large_runs, 8);
    assert_eq!(during.large_live_bytes - before.large_live_bytes, 8 * run as u64);
    assert!(during.peak_live_bytes >= during.live_bytes);
    assert!(during.resident_bytes >= during.slab_bytes + during.large_live_bytes);

    // Freed on another thread.
    std::thread::spawn(move || drop(held)).join().unwrap();
    let after = snmalloc_prof::stats();
    assert_eq!(after.large_live_bytes, before.large_live_bytes);
    assert!(after.peak_live_bytes >= during.live_bytes);

    // Small objects of one class: 3000 of 6000 bytes (class 6144).
    let class = during
        .sizeclasses
        .iter()
        .position(|c| c.object_size == 6144)
        .expect("a 6144-byte class");
    let small: Vec<Vec<u8>> = (0..3000).map(|_| vec![2u8; 6000]).collect();
    let s = snmalloc_prof::stats();
    assert!(s.sizeclasses[class].live_objects >= 3000);
    assert!(s.sizeclasses[class].slab_bytes >= 3000 * 6144);
    assert!(s.small_live_bytes >= 3000 * 6144);
    std::thread::spawn(move || drop(small)).join().unwrap();
    let s = snmalloc_prof::stats();
    assert!(s.sizeclasses[class].live_objects <= 64, "{}", s.sizeclasses[class].live_objects);
}
