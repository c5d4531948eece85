//! Helpers shared by the tests of the raw sample stream.
#![allow(dead_code)] // each test binary uses its own part

use std::alloc::{alloc, dealloc, Layout};
use std::path::Path;
use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

use snmalloc_prof::profile::Sample;

extern "C" {
    fn gettid() -> i32;
}

/// The OS id of the calling thread, as samples report it.
pub fn thread_id() -> u64 {
    // SAFETY: no arguments, cannot fail.
    unsafe { gettid() as u64 }
}

pub fn now_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as i64
}

/// Runs `f` on a thread started after the caller called `profile::start`.
///
/// A new sampling interval takes effect at each thread's next free-list
/// refill: objects already on a thread's fast free lists are handed out
/// unsampled.  A thread that starts after `start` fills every list under
/// the new interval, so at interval 1 every one of its allocations is
/// sampled.
pub fn on_fresh_thread<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::spawn(f).join().unwrap()
}

/// One object allocated through the global allocator by `allocate_tracked`.
pub struct Tracked {
    pub ptr: *mut u8,
    pub layout: Layout,
}

// SAFETY: a plain heap block of the global allocator, which may be used and
// freed on any thread.
unsafe impl Send for Tracked {}

impl Tracked {
    pub fn address(&self) -> usize {
        self.ptr as usize
    }

    pub fn allocated_size(&self) -> usize {
        // SAFETY: a live object of the global allocator.
        unsafe { snmalloc_prof::usable_size(self.ptr) }
    }

    pub fn free(self) {
        // SAFETY: allocated with this layout and freed once (self is consumed).
        unsafe { dealloc(self.ptr, self.layout) }
    }
}

/// The size of the `i`th tracked object: small sizes of every sizeclass
/// range, and every 97th one large (over 64 KiB).
pub fn tracked_size(i: usize) -> usize {
    match i % 97 {
        0 => 100_000 + i,
        _ => 1 + (i * 37) % 3000,
    }
}

/// Allocates `count` objects of `tracked_size(i)` bytes into `out`, which
/// must have room (so that this function allocates nothing else).
#[inline(never)]
pub fn allocate_tracked(count: usize, out: &mut Vec<Tracked>) {
    assert!(out.capacity() - out.len() >= count);
    for i in 0..count {
        let layout = Layout::from_size_align(tracked_size(i), 8).unwrap();
        // SAFETY: the size is not zero.
        let ptr = unsafe { alloc(layout) };
        assert!(!ptr.is_null());
        out.push(Tracked { ptr, layout });
    }
}

/// Whether a sample was taken on thread `thread_id` between `start_ns` and
/// `end_ns`: the samples of one stretch of one thread's work.
pub fn taken_during(sample: &Sample, thread_id: u64, start_ns: i64, end_ns: i64) -> bool {
    sample.thread_id == thread_id && start_ns <= sample.time_ns && sample.time_ns <= end_ns
}

/// Whether a raw stack holds a return address inside `allocate_tracked`
/// (a call from its body: after its entry, within a few KiB of it).
pub fn stack_passes_through_allocate_tracked(frames: &[usize]) -> bool {
    let entry = allocate_tracked as fn(usize, &mut Vec<Tracked>) as usize;
    frames.iter().any(|&ret| ret > entry && ret - entry < 4096)
}

/// `go tool pprof -top` of `profile` with `options`: each row's name and
/// cumulative value (rows whose value does not parse, such as "1.5MB"
/// without `-unit=byte`, are left out).
pub fn pprof_top_rows(profile: &Path, options: &[&str]) -> Vec<(String, f64)> {
    let output = Command::new("go")
        .args(["tool", "pprof", "-top"])
        .args(options)
        .arg(profile)
        .output()
        .expect("cannot run `go tool pprof`: this test needs Go (Debian: golang-go)");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "go tool pprof failed: {}\n{stdout}",
        String::from_utf8_lossy(&output.stderr)
    );
    // Rows after the header: flat flat% sum% cum cum% name, where name may
    // contain spaces ("<T as Trait>::f").
    stdout
        .lines()
        .skip_while(|line| !line.trim_start().starts_with("flat"))
        .skip(1)
        .filter_map(|line| {
            let columns: Vec<&str> = line.split_whitespace().collect();
            let cum = columns.get(3)?.trim_end_matches('B').parse::<f64>().ok()?;
            Some((columns[5..].join(" "), cum))
        })
        .collect()
}

/// The largest cumulative value, in `go tool pprof -top` of one sample
/// type with more `options`, of a row naming `function` (its name is
/// demangled or half-demangled depending on the mangling scheme; the boxes
/// are made in frames it calls: iterator adaptors, Box::new's inlined
/// parts).
pub fn pprof_top_cum(profile: &Path, sample_index: &str, options: &[&str], function: &str) -> i64 {
    let sample_index = format!("-sample_index={sample_index}");
    let mut all = vec!["-nodefraction=0", sample_index.as_str()];
    all.extend_from_slice(options);
    pprof_top_rows(profile, &all)
        .iter()
        .filter(|(name, _)| name.contains(function))
        .map(|&(_, cum)| cum as i64)
        .max()
        .unwrap_or(0)
}
