//! `profile::dump_lifetimes` read back with `go tool pprof`: at rate 1
//! (every allocation a sample of weight 1), boxes dropped at once, boxes
//! held over the dump, and boxes dropped by another thread are counted
//! exactly, each with its freeing-thread label.
//!
//! Its own test binary: the profiler is per process.

use std::hint::black_box;
use std::path::Path;

use snmalloc_prof::{profile, SnMalloc};

mod common;
use common::pprof_top_cum;

#[global_allocator]
static ALLOCATOR: SnMalloc = SnMalloc;

// A size nothing else here allocates, in objects counted exactly.
const SIZE: usize = 3000;
const CHURNED: usize = 2000;
const HELD: usize = 300;
const HANDED: usize = 500;

#[inline(never)]
fn churn_boxes() {
    for i in 0..CHURNED {
        drop(black_box(Box::new([i as u8; SIZE])));
    }
}

#[inline(never)]
#[allow(clippy::vec_box)] // one allocation per box is the point
fn hold_boxes() -> Vec<Box<[u8; SIZE]>> {
    (0..HELD).map(|i| Box::new([i as u8; SIZE])).collect()
}

#[inline(never)]
#[allow(clippy::vec_box)]
fn boxes_for_another_thread() -> Vec<Box<[u8; SIZE]>> {
    (0..HANDED).map(|i| Box::new([i as u8; SIZE])).collect()
}


#[test]
fn lifetimes_of_dropped_held_and_handed_boxes() {
    profile::start(1).unwrap();
    // Fresh threads: their free lists hold nothing taken before start().
    let held = std::thread::spawn(|| {
        churn_boxes();
        hold_boxes()
    })
    .join()
    .unwrap();
    let handed = std::thread::spawn(boxes_for_another_thread).join().unwrap();
    std::thread::spawn(move || drop(handed)).join().unwrap();

    let path = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("lifetimes-{}.pb.gz", std::process::id()));
    profile::dump_lifetimes(&path).unwrap();
    profile::stop().unwrap();

    let other = ["-tagfocus=freed_by=other_thread"];
    assert_eq!(pprof_top_cum(&path, "freed_objects", &[], "churn_boxes"), CHURNED as i64);
    assert_eq!(pprof_top_cum(&path, "freed_objects", &other, "churn_boxes"), 0);
    // Each site's count includes the vector that holds its boxes.
    assert_eq!(pprof_top_cum(&path, "live_objects", &[], "hold_boxes"), HELD as i64 + 1);
    assert_eq!(pprof_top_cum(&path, "freed_objects", &[], "hold_boxes"), 0);
    assert_eq!(
        pprof_top_cum(&path, "freed_objects", &other, "boxes_for_another_thread"),
        HANDED as i64 + 1
    );
    assert_eq!(
        pprof_top_cum(&path, "freed_objects", &["-tagfocus=freed_by=same_thread"], "boxes_for_another_thread"),
        0
    );

    let missing = Path::new(env!("CARGO_TARGET_TMPDIR")).join("no-such-directory/l.pb.gz");
    assert_eq!(
        profile::dump_lifetimes(&missing).unwrap_err().kind(),
        std::io::ErrorKind::NotFound
    );
    drop(held);
    std::fs::remove_file(&path).unwrap();
}
