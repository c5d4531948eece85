//! `profile::with_label` read back with `go tool pprof`: at rate 1 (every
//! allocation a sample of weight 1), boxes made under nested labels on one
//! thread, some dropped by another thread, are counted exactly per label
//! in the heap and lifetime profiles, also when `f` panics.
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

#[inline(never)]
#[allow(clippy::vec_box)] // one allocation per box is the point
fn labelled_boxes(n: usize) -> Vec<Box<[u8; SIZE]>> {
    (0..n).map(|i| Box::new([i as u8; SIZE])).collect()
}


#[test]
fn with_label_tags_the_allocations_of_its_closure() {
    profile::start(1).unwrap();
    // A fresh thread: its free lists hold nothing taken before start().
    let (outer, inner, handed) = std::thread::spawn(|| {
        profile::with_label("tenant", "acme", || {
            let outer = labelled_boxes(100);
            let (inner, handed) = profile::with_label("request", "r7", || {
                (labelled_boxes(30), labelled_boxes(20))
            });
            // The closure's label goes with it, also when it unwinds.
            let unwound = std::panic::catch_unwind(|| {
                profile::with_label("request", "panicked", || panic!("unwinds through with_label"))
            });
            assert!(unwound.is_err());
            (black_box(outer), inner, handed)
        })
    })
    .join()
    .unwrap();
    std::thread::spawn(move || drop(handed)).join().unwrap();
    let unlabelled = std::thread::spawn(|| labelled_boxes(7)).join().unwrap();

    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let heap = dir.join(format!("labels-{}.pb.gz", std::process::id()));
    let lifetimes = dir.join(format!("labels-lifetimes-{}.pb.gz", std::process::id()));
    profile::dump(&heap).unwrap();
    profile::dump_lifetimes(&lifetimes).unwrap();
    profile::stop().unwrap();

    // Each call's count includes the vector that holds its boxes.
    let site = "labelled_boxes";
    let inuse = |options: &[&str]| pprof_top_cum(&heap, "inuse_objects", options, site);
    assert_eq!(inuse(&[]), 100 + 1 + 30 + 1 + 7 + 1);
    assert_eq!(inuse(&["-tagfocus=tenant=acme"]), 100 + 1 + 30 + 1);
    assert_eq!(inuse(&["-tagfocus=request=r7"]), 30 + 1);
    assert_eq!(inuse(&["-tagfocus=request=panicked"]), 0);
    assert_eq!(inuse(&["-tagignore=tenant=acme"]), 7 + 1);
    assert_eq!(
        pprof_top_cum(&heap, "alloc_objects", &["-tagfocus=request=r7"], site),
        30 + 1 + 20 + 1
    );
    let other_thread = ["-tagfocus=request=r7", "-tagfocus=freed_by=other_thread"];
    assert_eq!(pprof_top_cum(&lifetimes, "freed_objects", &other_thread, site), 20 + 1);

    drop((outer, inner, unlabelled));
    std::fs::remove_file(&heap).unwrap();
    std::fs::remove_file(&lifetimes).unwrap();
}
