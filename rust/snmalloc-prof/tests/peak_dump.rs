//! `profile::dump_peak` and `dump_peak_fd` write the peak-heap profile (its
//! contents are checked against pprof by the C++ test func-profile-peak);
//! errors come back as io::Error.
//!
//! Its own test binary: the profiler is per process.

use std::fs::File;
use std::io::Read;
use std::path::Path;

use snmalloc_prof::{profile, SnMalloc};

#[global_allocator]
static ALLOCATOR: SnMalloc = SnMalloc;

fn is_gzip(path: &Path) -> bool {
    let mut magic = [0u8; 2];
    File::open(path).and_then(|mut f| f.read_exact(&mut magic)).is_ok() && magic == [0x1f, 0x8b]
}

#[test]
fn peak_profile_is_written_to_a_path_and_a_descriptor() {
    profile::start(64 * 1024).unwrap();
    let held: Vec<Vec<u8>> = (0..4096).map(|i| vec![i as u8; 4096]).collect();
    drop(held);

    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let path = dir.join(format!("peak-{}.pb.gz", std::process::id()));
    profile::dump_peak(&path).unwrap();
    assert!(is_gzip(&path));

    let fd_path = dir.join(format!("peak-fd-{}.pb.gz", std::process::id()));
    profile::dump_peak_fd(File::create(&fd_path).unwrap()).unwrap();
    assert!(is_gzip(&fd_path));

    let missing = dir.join("no-such-directory/peak.pb.gz");
    let error = profile::dump_peak(&missing).unwrap_err();
    assert_eq!(error.kind(), std::io::ErrorKind::NotFound);
    profile::stop().unwrap();
    std::fs::remove_file(&path).unwrap();
    std::fs::remove_file(&fd_path).unwrap();
}
