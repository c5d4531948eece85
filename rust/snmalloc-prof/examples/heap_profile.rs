//! Holds memory at two named functions, writes a heap profile, and shows
//! the live samples and the event stream.
//!
//!     cargo run --release --example heap_profile -- /tmp/heap.pb.gz
//!     go tool pprof -top /tmp/heap.pb.gz
//!
//! pprof attributes about 49 MiB to `build_table` (the buffers and the hash
//! table) and 18 MiB to `cache_lines` (the lines and the vector of boxes),
//! give or take the sampling error: one standard deviation is about
//! 3.5 MiB and 2 MiB at this interval (see docs/profiling.md).

use std::collections::HashMap;

use snmalloc_prof::profile::{self, EventKind, EventReader};
use snmalloc_prof::SnMalloc;

#[global_allocator]
static ALLOCATOR: SnMalloc = SnMalloc;

/// 48 MiB in 12,288 buffers of 4 KiB.
#[inline(never)]
fn build_table() -> HashMap<u32, Vec<u8>> {
    (0..12_288u32).map(|k| (k, vec![k as u8; 4096])).collect()
}

/// 16 MiB in 262,144 boxed lines of 64 bytes.
#[inline(never)]
#[allow(clippy::vec_box)] // one allocation per line is the point
fn cache_lines() -> Vec<Box<[u8; 64]>> {
    (0..262_144).map(|i| Box::new([i as u8; 64])).collect()
}

fn main() -> std::io::Result<()> {
    let path = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "heap.pb.gz".into());
    println!("allocator: {}", snmalloc_prof::identity());

    let mut events = EventReader::start(1 << 12)?;
    profile::start(256 * 1024)?; // one sample per 256 KiB on average

    let table = build_table();
    let lines = cache_lines();

    profile::dump(&path)?;
    println!("wrote {path}; view it with: go tool pprof -top {path}");

    let snapshot = profile::snapshot()?;
    let estimated: f64 = snapshot.iter().map(|s| s.estimated_bytes()).sum();
    println!(
        "{} live samples stand for about {:.1} MiB (held: {:.1} MiB)",
        snapshot.len(),
        estimated / (1 << 20) as f64,
        (table.len() * 4096 + lines.len() * 64) as f64 / (1 << 20) as f64
    );

    let (mut births, mut deaths) = (0, 0);
    for event in events.drain() {
        match event.kind {
            EventKind::Alloc => births += 1,
            EventKind::Free => deaths += 1,
        }
    }
    println!(
        "event stream: {births} sampled allocations, {deaths} sampled frees, {} dropped",
        events.dropped()
    );

    // Use every block, so the optimiser cannot drop them.
    let checksum: u64 = table.values().map(|v| u64::from(v[4095])).sum::<u64>()
        + lines.iter().map(|l| u64::from(l[63])).sum::<u64>();
    println!("checksum of the held blocks: {checksum}");
    profile::stop()
}
