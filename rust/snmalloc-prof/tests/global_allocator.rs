//! SnMalloc as the global allocator: it is snmalloc that serves Rust's
//! allocations (and the C library's), for every alignment and resize path.

use std::alloc::{alloc, alloc_zeroed, dealloc, realloc, Layout};
use std::ffi::CStr;
use std::os::raw::{c_char, c_void};

use snmalloc_prof::SnMalloc;

#[global_allocator]
static ALLOCATOR: SnMalloc = SnMalloc;

extern "C" {
    fn strdup(s: *const c_char) -> *mut c_char;
    fn free(p: *mut c_void);
}

#[test]
fn the_linked_allocator_is_snmalloc() {
    assert_eq!(snmalloc_prof::identity(), "snmalloc");
}

#[test]
fn rust_allocations_are_snmalloc_objects() {
    // malloc_usable_size is snmalloc's, which reports 0 for memory it does
    // not own: a positive size proves the Box came from snmalloc.
    let boxed = Box::new([7u8; 100]);
    let usable = unsafe { snmalloc_prof::usable_size(boxed.as_ptr()) };
    assert!(usable >= 100, "usable size {usable}");

    let big = vec![0u64; 1 << 20]; // 8 MiB: a large allocation
    assert!(unsafe { snmalloc_prof::usable_size(big.as_ptr().cast()) } >= 8 << 20);

    let on_stack = 0u8;
    assert_eq!(unsafe { snmalloc_prof::usable_size(&on_stack) }, 0);
}

#[test]
fn the_c_library_allocates_from_snmalloc_too() {
    // strdup calls malloc inside libc: the executable's malloc must win.
    let original = CStr::from_bytes_with_nul(b"profile me\0").unwrap();
    let copy = unsafe { strdup(original.as_ptr()) };
    assert!(!copy.is_null());
    assert_eq!(unsafe { CStr::from_ptr(copy) }.to_str(), Ok("profile me"));
    assert!(unsafe { snmalloc_prof::usable_size(copy.cast()) } > 0);
    unsafe { free(copy.cast()) };
}

#[test]
fn every_alignment_is_honoured() {
    for align_bits in 0..=21 {
        let align = 1usize << align_bits;
        for size in [1, 8, 24, align, 3 * align, 100_000] {
            let layout = Layout::from_size_align(size, align).unwrap();
            unsafe {
                let p = alloc(layout);
                assert!(!p.is_null(), "{layout:?}");
                assert_eq!(p as usize % align, 0, "{layout:?}");
                assert!(snmalloc_prof::usable_size(p) >= size, "{layout:?}");
                p.write_bytes(0xa5, size);
                dealloc(p, layout);
            }
        }
    }
}

#[test]
fn alloc_zeroed_is_zero_even_for_reused_memory() {
    for align in [8, 16, 64, 4096] {
        for size in [16, 1000, 70_000] {
            let layout = Layout::from_size_align(size, align).unwrap();
            unsafe {
                // Dirty a block of this shape, free it, then ask for zeroes.
                let dirty = alloc(layout);
                dirty.write_bytes(0xff, size);
                dealloc(dirty, layout);
                let p = alloc_zeroed(layout);
                assert_eq!(p as usize % align, 0);
                assert!(
                    std::slice::from_raw_parts(p, size).iter().all(|&b| b == 0),
                    "{layout:?}"
                );
                dealloc(p, layout);
            }
        }
    }
}

#[test]
fn realloc_keeps_contents_and_alignment() {
    for align in [1, 16, 32, 4096, 1 << 16] {
        let mut layout = Layout::from_size_align(10, align).unwrap();
        unsafe {
            let mut p = alloc(layout);
            for (i, b) in std::slice::from_raw_parts_mut(p, 10).iter_mut().enumerate() {
                *b = i as u8;
            }
            for new_size in [100, 5000, 300_000, 7, 20] {
                p = realloc(p, layout, new_size);
                assert!(!p.is_null());
                assert_eq!(p as usize % align, 0, "align {align} size {new_size}");
                let kept = std::slice::from_raw_parts(p, 7);
                assert!(
                    kept.iter().enumerate().all(|(i, &b)| b == i as u8),
                    "align {align} size {new_size}"
                );
                layout = Layout::from_size_align(new_size, align).unwrap();
            }
            dealloc(p, layout);
        }
    }
}

#[test]
fn collections_work_across_threads() {
    // Objects allocated on one thread and freed on another (remote frees).
    let handles: Vec<_> = (0..4)
        .map(|t| {
            std::thread::spawn(move || (0..10_000).map(|i| format!("{t}:{i}")).collect::<Vec<_>>())
        })
        .collect();
    let all: Vec<String> = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    assert_eq!(all.len(), 40_000);
    assert_eq!(all[12_345], "1:2345");
}

#[test]
fn panics_unwind_through_the_linked_unwinder() {
    // The stack capture uses libgcc's unwinder too; Rust's panics must still
    // unwind.
    let caught = std::panic::catch_unwind(|| {
        let _held = vec![1u8; 1000];
        panic!("expected");
    });
    assert!(caught.is_err());
}
