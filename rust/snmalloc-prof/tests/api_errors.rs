//! The safe API's errors carry the C API's errno, and its guards hold.
//!
//! One test function: the profiler and the event stream are per process.

use std::fs::File;
use std::io::{ErrorKind, Read, Seek, SeekFrom};
use std::path::Path;

use snmalloc_prof::profile::{self, EventReader};
use snmalloc_prof::SnMalloc;

#[global_allocator]
static ALLOCATOR: SnMalloc = SnMalloc;

// Linux errno values.
const EINVAL: i32 = 22;
const EBADF: i32 = 9;

fn gzip_magic_at_start(file: &mut File) -> bool {
    let mut magic = [0u8; 2];
    file.seek(SeekFrom::Start(0)).unwrap();
    file.read_exact(&mut magic).is_ok() && magic == [0x1f, 0x8b]
}

#[test]
fn errors_and_guards() {
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));

    // start(0) is EINVAL and changes nothing.
    let was_active = profile::is_active();
    assert_eq!(profile::start(0).unwrap_err().raw_os_error(), Some(EINVAL));
    assert_eq!(
        profile::start(0).unwrap_err().kind(),
        ErrorKind::InvalidInput
    );
    assert_eq!(profile::is_active(), was_active);
    profile::start(1 << 20).unwrap();
    assert!(profile::is_active());

    assert_eq!(
        profile::set_max_depth(0).unwrap_err().kind(),
        ErrorKind::InvalidInput
    );
    assert_eq!(
        profile::set_max_depth(1000).unwrap_err().kind(),
        ErrorKind::InvalidInput
    );
    profile::set_max_depth(64).unwrap();

    // dump: errno of the failing step; a NUL byte never reaches C.
    let missing_dir = tmp.join("no-such-directory").join("heap.pb.gz");
    assert_eq!(
        profile::dump(&missing_dir).unwrap_err().kind(),
        ErrorKind::NotFound
    );
    assert_eq!(
        profile::dump("heap\0.pb.gz").unwrap_err().kind(),
        ErrorKind::InvalidInput
    );
    assert_eq!(
        profile::dump("").unwrap_err().kind(),
        ErrorKind::InvalidInput
    );

    // dump_fd writes a gzip stream and leaves the descriptor open.
    let path = tmp.join(format!("api_errors-{}.pb.gz", std::process::id()));
    let mut file = File::options()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)
        .unwrap();
    profile::dump_fd(&file).unwrap();
    assert!(gzip_magic_at_start(&mut file));
    let read_only = File::open(&path).unwrap();
    assert_eq!(
        profile::dump_fd(&read_only).unwrap_err().raw_os_error(),
        Some(EBADF)
    );
    std::fs::remove_file(&path).unwrap();

    // The event stream: EINVAL for 0, and one reader at a time.
    assert_eq!(
        EventReader::start(0).unwrap_err().kind(),
        ErrorKind::InvalidInput
    );
    let reader = EventReader::start(16).unwrap();
    assert_eq!(
        EventReader::start(16).unwrap_err().kind(),
        ErrorKind::AlreadyExists
    );
    drop(reader);
    drop(EventReader::start(16).unwrap());

    profile::stop().unwrap();
    assert!(!profile::is_active());
}
