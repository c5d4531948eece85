//! A heap profile written by `profile::dump` and read back with
//! `go tool pprof` attributes the live bytes to the Rust functions that
//! allocated them, within a statistically justified tolerance.
//!
//! Its own test binary: the profiler is per process.

use std::path::Path;

use snmalloc_prof::{profile, SnMalloc};

mod common;
use common::pprof_top_rows;

#[global_allocator]
static ALLOCATOR: SnMalloc = SnMalloc;

/// Mean sampling interval R.
const INTERVAL: usize = 64 * 1024;

const VECTOR_SIZE: usize = 4096;
const VECTOR_COUNT: usize = 64 * 1024 * 1024 / VECTOR_SIZE; // 64 MiB
const BOX_SIZE: usize = 64;
const BOX_COUNT: usize = 16 * 1024 * 1024 / BOX_SIZE; // 16 MiB

#[inline(never)]
fn hold_vectors() -> Vec<Vec<u8>> {
    let mut held = Vec::with_capacity(VECTOR_COUNT);
    for i in 0..VECTOR_COUNT {
        held.push(vec![i as u8; VECTOR_SIZE]);
    }
    held
}

#[inline(never)]
#[allow(clippy::vec_box)] // one allocation per box is the point
fn hold_boxes() -> Vec<Box<[u8; BOX_SIZE]>> {
    let mut held = Vec::with_capacity(BOX_COUNT);
    for i in 0..BOX_COUNT {
        held.push(Box::new([i as u8; BOX_SIZE]));
    }
    held
}

/// The bytes the profiler accounts to an object: its allocated (sizeclass)
/// size, which is what `malloc_usable_size` reports.
fn allocated<T>(p: *const T) -> f64 {
    let size = unsafe { snmalloc_prof::usable_size(p.cast()) };
    assert!(size > 0, "not an snmalloc object");
    size as f64
}

/// Standard deviation of the profile's estimate of the bytes held by
/// `count` objects of `size` bytes each.
///
/// Each byte allocated is a sampling point with probability 1/R (a Poisson
/// process over the allocated bytes), so an object of s bytes is sampled
/// with probability p = 1 - exp(-s/R), independently of every other object,
/// and a sampled object is reported as s/p bytes.  The estimate is
/// sum(s/p * X_i) with X_i ~ Bernoulli(p): unbiased, with variance
/// n * (s/p)^2 * p(1-p) = n * s^2 * (1-p)/p.
fn estimate_sd(count: usize, size: usize) -> f64 {
    let s = size as f64;
    let p = 1.0 - (-s / INTERVAL as f64).exp();
    (count as f64 * s * s * (1.0 - p) / p).sqrt()
}

/// Tolerance in standard deviations.  With ~1,000 (vectors) and ~256 (boxes)
/// expected samples the estimate is close to normal; a deviation beyond 5 sd
/// has probability about 6e-7, so the two checks together fail falsely about
/// once in a million runs.
const TOLERANCE_SD: f64 = 5.0;

/// `go tool pprof -top` of the profile: for every node, its name and its
/// cumulative bytes.
fn pprof_top(profile: &Path) -> Vec<(String, f64)> {
    let rows = pprof_top_rows(profile, &["-sample_index=inuse_space", "-unit=byte"]);
    assert!(!rows.is_empty(), "no rows in pprof output of {}", profile.display());
    rows
}

/// The cumulative bytes of the function named `function`.  pprof shows Rust
/// names demangled or half-demangled depending on the mangling scheme
/// (`crate::hold_vectors::h0123abcd...` for legacy symbols,
/// `crate::hold_vectors` for v0, and closures inside it as
/// `crate::hold_vectors::{closure#0}`): every row that names it is one of
/// these, and the function itself has the largest cumulative value.
fn cumulative_bytes(rows: &[(String, f64)], function: &str) -> f64 {
    rows.iter()
        .filter(|(name, _)| name.contains(function))
        .map(|&(_, cum)| cum)
        .fold(0.0, f64::max)
}

#[test]
fn named_functions_show_their_live_bytes_in_pprof() {
    profile::start(INTERVAL).unwrap();
    assert!(profile::is_active());

    let vectors = hold_vectors();
    let boxes = hold_boxes();

    let path = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("pprof_dump-{}.pb.gz", std::process::id()));
    profile::dump(&path).unwrap();
    profile::stop().unwrap();
    assert!(!profile::is_active());

    // What each function holds, as the profiler counts it: the objects and
    // the vector that holds them.  The holding vectors (384 KiB and 2 MiB)
    // are large objects, sampled with probability ~1 and weight ~1.
    let vector_bytes =
        allocated(vectors.as_ptr()) + vectors.iter().map(|v| allocated(v.as_ptr())).sum::<f64>();
    let box_bytes = allocated(boxes.as_ptr()) + boxes.iter().map(|b| allocated(&**b)).sum::<f64>();
    let vector_sd = estimate_sd(VECTOR_COUNT, VECTOR_SIZE);
    let box_sd = estimate_sd(BOX_COUNT, BOX_SIZE);

    let rows = pprof_top(&path);
    let vector_estimate = cumulative_bytes(&rows, "hold_vectors");
    let box_estimate = cumulative_bytes(&rows, "hold_boxes");
    let table: String = rows
        .iter()
        .map(|(name, cum)| format!("{cum:>12.0}  {name}\n"))
        .collect();
    let report = format!(
        "hold_vectors: {vector_estimate:.0} B in the profile, {vector_bytes:.0} held, sd {vector_sd:.0}\n\
         hold_boxes: {box_estimate:.0} B in the profile, {box_bytes:.0} held, sd {box_sd:.0}\n\
         cumulative bytes by pprof node:\n{table}"
    );
    println!("{report}");
    assert!(
        (vector_estimate - vector_bytes).abs() <= TOLERANCE_SD * vector_sd,
        "{report}"
    );
    assert!(
        (box_estimate - box_bytes).abs() <= TOLERANCE_SD * box_sd,
        "{report}"
    );

    drop(vectors);
    drop(boxes);
    std::fs::remove_file(&path).unwrap();
}
