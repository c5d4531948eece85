//! Builds the allocator with heap profiling from this repository's CMake
//! project (the `snmallocshim-static` target, one object that defines
//! malloc/free/operator new and the `snmalloc_profile_*` C API) into
//! OUT_DIR, and links it into every Rust binary that depends on this crate.
//!
//! The `cmake` binary is run directly (no `cmake` crate: the workspace builds
//! offline with no crates from outside it).  Set `CMAKE` to use another
//! binary; CMake itself honours `CC` and `CXX`.

use std::env;
use std::path::PathBuf;
use std::process::Command;

fn main() {
    let target_os = env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if target_os != "linux" {
        panic!("snmalloc-prof-sys supports Linux only (target OS: {target_os:?})");
    }

    let manifest_dir =
        PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    // The crate lives at <repository>/rust/snmalloc-prof-sys.
    let repo_root = manifest_dir
        .join("../..")
        .canonicalize()
        .expect("the repository root above rust/snmalloc-prof-sys");
    if !repo_root.join("CMakeLists.txt").is_file() || !repo_root.join("src/snmalloc").is_dir() {
        panic!(
            "{} does not look like the snmalloc-prof repository (no CMakeLists.txt and src/snmalloc)",
            repo_root.display()
        );
    }

    for input in ["CMakeLists.txt", "cmake", "src/snmalloc"] {
        println!("cargo:rerun-if-changed={}", repo_root.join(input).display());
    }
    println!("cargo:rerun-if-changed=build.rs");
    for variable in ["CMAKE", "CC", "CXX", "SNMALLOC_PROFILE_UNWINDER"] {
        println!("cargo:rerun-if-env-changed={variable}");
    }

    let build_dir = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR")).join("cmake-build");
    let cmake = env::var_os("CMAKE").unwrap_or_else(|| "cmake".into());
    let jobs = env::var("NUM_JOBS").unwrap_or_else(|_| "2".into());

    // The stack walker (auto, builtin, libunwind or libgcc: CMake's
    // SNMALLOC_PROFILE_UNWINDER), auto unless the environment names one.
    let unwinder = env::var("SNMALLOC_PROFILE_UNWINDER").unwrap_or_else(|_| "auto".into());

    run(Command::new(&cmake)
        .arg("-S")
        .arg(&repo_root)
        .arg("-B")
        .arg(&build_dir)
        .args([
            "-DSNMALLOC_PROFILE=ON",
            "-DSNMALLOC_BUILD_TESTING=OFF",
            "-DCMAKE_BUILD_TYPE=Release",
        ])
        .arg(format!("-DSNMALLOC_PROFILE_UNWINDER={unwinder}")));
    run(Command::new(&cmake).arg("--build").arg(&build_dir).args([
        "--target",
        "snmallocshim-static",
        "-j",
        &jobs,
    ]));

    let archive = build_dir.join("libsnmallocshim-static.a");
    if !archive.is_file() {
        panic!("CMake finished but {} is missing", archive.display());
    }

    println!("cargo:rustc-link-search=native={}", build_dir.display());
    // Whole archive: the allocator must be linked even into a binary that
    // never names one of its symbols, so that its malloc/free (defined in
    // the executable, hence found before libc's by the dynamic linker)
    // serve the whole process, C libraries included.
    println!("cargo:rustc-link-lib=static:-bundle,+whole-archive=snmallocshim-static");
    // What the profiling build needs: libgcc_s (the stack capture's FDE
    // lookup and fallback unwinder, the ones Rust panics use too), libdl
    // (dladdr, and dlopen of zlib at the first dump), the C++ runtime,
    // threads.
    for library in ["gcc_s", "dl", "stdc++", "pthread"] {
        println!("cargo:rustc-link-lib=dylib={library}");
    }
    // libunwind, when CMake chose it to walk the stacks (auto does where
    // there is no built-in walker and libunwind is installed).
    let cache = build_dir.join("CMakeCache.txt");
    let cache = std::fs::read_to_string(&cache)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", cache.display()));
    if cache_value(&cache, "SNMALLOC_UNWINDER_CHOSEN") == Some("libunwind") {
        let library = cache_value(&cache, "SNMALLOC_LIBUNWIND_LIBRARY")
            .map(PathBuf::from)
            .expect("SNMALLOC_LIBUNWIND_LIBRARY in CMakeCache.txt with libunwind chosen");
        if let Some(directory) = library.parent() {
            println!("cargo:rustc-link-search=native={}", directory.display());
        }
        println!("cargo:rustc-link-lib=dylib=unwind");
    }
}

/// The value of `name` in a CMakeCache.txt (`NAME:TYPE=value` lines).
fn cache_value<'a>(cache: &'a str, name: &str) -> Option<&'a str> {
    cache.lines().find_map(|line| {
        let (key, value) = line.split_once('=')?;
        (key.split(':').next() == Some(name)).then_some(value)
    })
}

fn run(command: &mut Command) {
    let status = command
        .status()
        .unwrap_or_else(|e| panic!("cannot run {command:?}: {e} (is cmake installed?)"));
    if !status.success() {
        panic!("{command:?} failed with {status}");
    }
}
