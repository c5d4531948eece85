//! `profile::http_start`: the HTTP endpoint from Rust, read with a plain
//! TCP client.
//!
//! Its own test binary: the endpoint is per process.

use std::io::{Read, Write};
use std::net::TcpStream;

use snmalloc_prof::{profile, SnMalloc};

const EBUSY: i32 = 16; // Linux

#[global_allocator]
static ALLOCATOR: SnMalloc = SnMalloc;

fn get(port: u16, path: &str) -> Vec<u8> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(stream, "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).unwrap();
    response
}

fn body(response: &[u8]) -> &[u8] {
    let at = response.windows(4).position(|w| w == b"\r\n\r\n").expect("a header end");
    &response[at + 4..]
}

#[test]
fn serves_profiles_and_metrics_until_stopped() {
    assert_eq!(
        profile::http_start("not an address").unwrap_err().kind(),
        std::io::ErrorKind::InvalidInput
    );
    profile::start(64 * 1024).unwrap();
    let held: Vec<Vec<u8>> = (0..256).map(|_| vec![7u8; 64 * 1024]).collect();
    let port = profile::http_start(":0").unwrap();
    assert_ne!(port, 0);
    assert_eq!(profile::http_port(), Some(port));
    assert_eq!(profile::http_start(":0").unwrap_err().raw_os_error(), Some(EBUSY));

    let metrics = get(port, "/metrics");
    assert!(metrics.starts_with(b"HTTP/1.1 200 OK\r\n"));
    let text = String::from_utf8(body(&metrics).to_vec()).unwrap();
    let live: f64 = text
        .lines()
        .find_map(|l| l.strip_prefix("snmalloc_live_bytes "))
        .expect("snmalloc_live_bytes")
        .parse()
        .unwrap();
    // 16 MiB held; the statistic is an upper bound (snmalloc_stats.h).
    assert!(live >= 16.0 * 1048576.0, "{live}");

    let heap = get(port, "/debug/pprof/heap");
    assert!(heap.starts_with(b"HTTP/1.1 200 OK\r\n"));
    assert_eq!(&body(&heap)[..2], &[0x1f, 0x8b], "gzip");
    assert!(get(port, "/nowhere").starts_with(b"HTTP/1.1 404 "));

    profile::http_stop().unwrap();
    assert_eq!(profile::http_port(), None);
    assert!(TcpStream::connect(("127.0.0.1", port)).is_err());
    assert!(profile::http_stop().is_err());
    drop(held);
}
