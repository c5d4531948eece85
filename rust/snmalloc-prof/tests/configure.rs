//! `profile::configure`: the SNMALLOC_PROFILE settings at run time, with
//! automatic dumps written by the helper thread.
//!
//! Its own test binary: the profiler is per process.

use std::path::Path;
use std::time::{Duration, Instant};

use snmalloc_prof::{profile, SnMalloc};

#[global_allocator]
static ALLOCATOR: SnMalloc = SnMalloc;

#[test]
fn bad_settings_are_invalid_input_and_change_nothing() {
    for bad in ["keep=0", "dump_every=1x", "bogus=1", "rate"] {
        let error = profile::configure(bad).unwrap_err();
        assert_eq!(error.kind(), std::io::ErrorKind::InvalidInput, "{bad}");
    }
    assert!(profile::configure("a\0b").is_err());
}

#[test]
fn dump_every_writes_profiles_from_the_helper_thread() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("configure-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let settings = format!("rate=64k,dump_every=8m,keep=2,path={}/auto.%n.pb.gz", dir.display());
    profile::configure(&settings).unwrap();
    assert!(profile::is_active());
    // 64 MiB allocated: eight thresholds, of which two files are kept.
    for _ in 0..1024 {
        std::hint::black_box(vec![1u8; 64 * 1024]);
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    let count = || std::fs::read_dir(&dir).unwrap().count();
    while count() < 2 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(300));
    // Settings without automatic dumps turn them off.
    profile::configure("rate=64k").unwrap();
    profile::stop().unwrap();
    let names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert!(!names.is_empty() && names.len() <= 2, "{names:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}
