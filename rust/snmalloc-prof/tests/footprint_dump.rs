//! `profile::dump_footprint` read back with `go tool pprof`: the rows add
//! up to the process's resident set, and 32 MiB of boxes held at rate 1
//! (every allocation a sample of weight 1) are their site's resident bytes.
//!
//! Its own test binary: the profiler is per process.

use std::hint::black_box;
use std::process::Command;

use snmalloc_prof::{profile, SnMalloc};

#[global_allocator]
static ALLOCATOR: SnMalloc = SnMalloc;

const SIZE: usize = 4096;
const HELD: usize = 32 * 1024 * 1024 / SIZE;

#[inline(never)]
#[allow(clippy::vec_box)] // one allocation per box is the point
fn hold_pages() -> Vec<Box<[u8; SIZE]>> {
    (0..HELD).map(|i| black_box(Box::new([i as u8; SIZE]))).collect()
}

fn vm_rss() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse::<f64>().unwrap() * 1024.0
}

#[test]
fn footprint_adds_up_to_the_resident_set() {
    profile::start(1).unwrap();
    let held = std::thread::spawn(hold_pages).join().unwrap();
    profile::stop().unwrap();
    let dir = std::env::temp_dir().join(format!("footprint-dump-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("footprint.pb.gz");
    let before = vm_rss();
    profile::dump_footprint(&path).unwrap();
    let rss = (before + vm_rss()) / 2.0;

    let output = Command::new("go")
        .args(["tool", "pprof", "-top", "-unit=byte", "-nodecount=100000", "-nodefraction=0"])
        .arg(&path)
        .output()
        .expect("cannot run `go tool pprof`: this test needs Go (Debian: golang-go)");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "go tool pprof failed: {stdout}");
    // "Showing nodes accounting for NB, P% of TB total": with every node
    // shown, N is the rows' signed sum; T adds their absolute values, and
    // the row of live objects off the samples' estimate may be negative.
    let total: f64 = stdout
        .lines()
        .find_map(|l| l.strip_prefix("Showing nodes accounting for "))
        .and_then(|rest| rest.split_whitespace().next())
        .map(|v| v.trim_end_matches(',').trim_end_matches('B').parse().unwrap())
        .expect("no \"Showing nodes accounting for\" line");
    assert!((total - rss).abs() <= 0.05 * rss, "total {total}, VmRSS {rss}\n{stdout}");
    let site: f64 = stdout
        .lines()
        .filter(|l| l.contains("hold_pages"))
        .filter_map(|l| l.split_whitespace().nth(3)?.trim_end_matches('B').parse::<f64>().ok())
        .fold(0.0, f64::max);
    let bytes = (HELD * SIZE) as f64;
    assert!((site - bytes).abs() <= 0.02 * bytes, "hold_pages {site}, holds {bytes}\n{stdout}");
    drop(held);
    std::fs::remove_dir_all(&dir).unwrap();
}
