#!/usr/bin/env bash
# The test command: installs what is missing, then builds and runs the whole
# test suite in four configurations, part of it in a fifth built by clang,
# each in its own build directory:
#
#   build/off    Release, SNMALLOC_PROFILE=OFF (every test but the headers
#                compiled alone, which on runs the same way)
#   build/on     Release, SNMALLOC_PROFILE=ON
#   build/ubsan  Debug,   SNMALLOC_PROFILE=ON, UndefinedBehaviorSanitizer
#                (every test but the headers alone and the CMake consumer,
#                which compile without the sanitizer, as in on)
#   build/checks Release, SNMALLOC_PROFILE=ON, SNMALLOC_CHECKS=ON (every test
#                but the fuzz targets and the CMake consumer, which test the
#                profile parser, the ELF reader and packaging, none of which
#                the checks change; the fuzz targets are a minute of test time)
#   build/clang  Release, SNMALLOC_PROFILE=ON, built by clang: the shims,
#                the test support and the tests clang has failed before
#                (every header alone, the fast path identical in both shims,
#                the too-large new); the whole suite passes under clang too,
#                but would add a quarter of an hour here
#   build/aarch64 Release, SNMALLOC_PROFILE=ON, cross-compiled for aarch64
#                (cmake/toolchains/aarch64-linux-gnu.cmake); the functional
#                and unit tests run under qemu-user, but those listed at the
#                stage with why, and only the targets they use are built
#
# and `cargo test` in rust/ when the Rust crate exists.  Stops at the first
# failure.  The last line sums the ctest results of every configuration as
# "N passed, N failed".
#
# Environment: JOBS (default 2) build and test parallelism; CC/CXX pick the
# compilers as usual for CMake.
set -euo pipefail

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo_root"

jobs=${JOBS:-2}
test_timeout_seconds=600
ubsan_flags="-fsanitize=undefined -fno-sanitize-recover=undefined"

tests_passed=0
tests_failed=0
current_stage="start"
script_start=$SECONDS

# Always close with the summary, also when a stage fails and set -e ends us.
finish() {
  local status=$?
  echo
  if ((status != 0)); then
    echo "test.sh: FAILED in stage '$current_stage' (exit status $status)" >&2
  else
    echo "test.sh: all stages passed in $((SECONDS - script_start)) s"
  fi
  echo "$tests_passed passed, $tests_failed failed"
}
trap finish EXIT

# run_stage NAME COMMAND...: runs one step and reports how long it took.
run_stage() {
  current_stage=$1
  shift
  echo
  echo "==> [$current_stage] $*"
  local stage_start=$SECONDS
  "$@"
  echo "==> [$current_stage] done in $((SECONDS - stage_start)) s"
}

# Adds the counts of ctest's summary line ("X% tests passed, Y tests failed
# out of Z") in LOG to the totals.
count_ctest_results() {
  local log=$1 summary failed total
  summary=$(grep -E '^[0-9]+% tests passed, [0-9]+ tests? failed out of [0-9]+' "$log" | tail -n 1 || true)
  if [[ -z "$summary" ]]; then
    echo "test.sh: no ctest summary line in $log" >&2
    return 1
  fi
  failed=$(sed -E 's/.* ([0-9]+) tests? failed.*/\1/' <<<"$summary")
  total=$(sed -E 's/.* out of ([0-9]+).*/\1/' <<<"$summary")
  tests_passed=$((tests_passed + total - failed))
  tests_failed=$((tests_failed + failed))
}

# run_ctest BUILD_DIR [CTEST_ARGS...]
run_ctest() {
  local build_dir=$1 log="$1/ctest.log" status=0
  shift
  ctest --test-dir "$build_dir" --output-on-failure --no-tests=error \
    -j "$jobs" --timeout "$test_timeout_seconds" "$@" 2>&1 | tee "$log" || status=$?
  count_ctest_results "$log"
  if ((status != 0)); then
    echo "test.sh: ctest failed in $build_dir (log: $log)" >&2
    return "$status"
  fi
}

# configuration NAME CMAKE_ARGS...: configure, build and test build/NAME;
# CTEST_ARGS (an array) is passed to ctest; BUILD_TARGETS (an array) names
# the targets to build, every one when it is empty, those the selected
# tests use when it is (tested) (scripts/test_targets.py).
CTEST_ARGS=()
BUILD_TARGETS=()
configuration() {
  local name=$1 build_dir="build/$1"
  shift
  run_stage "$name: configure" cmake -S . -B "$build_dir" "$@"
  if [[ ${BUILD_TARGETS[*]-} == tested ]]; then
    local targets
    targets=$(python3 scripts/test_targets.py "$build_dir" \
      ${CTEST_ARGS[@]+"${CTEST_ARGS[@]}"} | paste -sd ';')
    run_stage "$name: name the targets its tests use" \
      cmake -S . -B "$build_dir" "-DSNMALLOC_SOME_TESTS=$targets"
    BUILD_TARGETS=(some-tests)
  fi
  run_stage "$name: build" cmake --build "$build_dir" -j "$jobs" \
    ${BUILD_TARGETS[@]+--target "${BUILD_TARGETS[@]}"}
  run_stage "$name: ctest" run_ctest "$build_dir" ${CTEST_ARGS[@]+"${CTEST_ARGS[@]}"}
}

run_stage setup bash scripts/setup.sh --aarch64

# Tests whose outcome does not depend on the configuration they are
# registered in run in one of them only: the headers compiled alone (the
# same compiler and flags in off, on and ubsan: about 3 minutes of a core
# each time) run in on, checks and clang; the CMake consumer (which builds
# the library itself, 2 minutes) in off and on.
CTEST_ARGS=(-E '^tree-headers-alone-')
configuration off -DCMAKE_BUILD_TYPE=Release -DSNMALLOC_PROFILE=OFF
CTEST_ARGS=()
configuration on -DCMAKE_BUILD_TYPE=Release -DSNMALLOC_PROFILE=ON
CTEST_ARGS=(-E '^(tree-headers-alone-|func-cmake-consumer$)')
configuration ubsan -DCMAKE_BUILD_TYPE=Debug -DSNMALLOC_PROFILE=ON \
  "-DCMAKE_C_FLAGS=$ubsan_flags" "-DCMAKE_CXX_FLAGS=$ubsan_flags"
CTEST_ARGS=(-E '^(fuzz-|func-cmake-consumer$)')
configuration checks -DCMAKE_BUILD_TYPE=Release -DSNMALLOC_PROFILE=ON -DSNMALLOC_CHECKS=ON

BUILD_TARGETS=(snmallocshim snmallocshim-profile snmallocshim-checks test-support
  func-preload-new-failure)
CTEST_ARGS=(-R '^(tree-headers-alone-|func-fastpath-identical$|func-preload-new-failure)')
configuration clang -DCMAKE_BUILD_TYPE=Release -DSNMALLOC_PROFILE=ON \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++
BUILD_TARGETS=()

# The functional and unit tests of aarch64, under qemu-user, except:
aarch64_left_out=(
  # The cached walker's own cases: it is x86-64's, and on aarch64 every
  # stack goes to a library's walker (the other cases of these run).
  'func-profile-unwind(-nofp)?:(the cached stack walk|a stack deeper)'
  # fork() while threads run: qemu 7.2 aborts on its own assertion
  # (cpu_exec: cpu == current_cpu) in the child.  fork-stdio ran past its
  # 60 s alarm under qemu with glibc's malloc too (no shim).
  'func-profile-fork:fork while threads allocate' 'func-decay-stress$'
  'func-fork-first-use$' 'func-preload-fork-stdio-'
  # qemu 7.2 maps no vDSO into an aarch64 guest.
  'unit-symbolize:functions of the vDSO'
  # Statistical: a live set near 1 GiB sampled for minutes of emulated time;
  # the sampler's arithmetic is the same on every architecture.
  'func-profile-statistical' 'func-profile-mode'
  # The allocator's API and resident-memory tests, with their sampled and
  # guarded runs: func-api and func-api-thread-churn each ran past their
  # 300 s timeout under qemu on a loaded 2-core machine.
  'func-api'
  # Run out of memory under RLIMIT_AS, which qemu does not apply to the
  # guest (it would fill the guest's 32 GiB instead).
  'func-hardening-oom' 'func-decay-wait$'
  # The malloc family against a shadow model: minutes of emulated time, and
  # no profiling path that the profile tests do not take.
  'func-hardening-model'
  # Instruction counts of the fast path by callgrind, which runs x86-64 only.
  'func-fastpath-identical$'
  # Packaging with the host's compiler: nothing of aarch64 in it.
  'func-cmake-consumer$'
  # The shim preloaded into the host's own programs (python3, sort, g++).
  'func-preload-(python|sort|compiler|profile)$'
  # Scripts that start their program themselves (not through the emulator)
  # and wait on the clock: dumps every second, Prometheus scrapes; a dump
  # without zlib.
  'func-service-profile$' 'func-http-endpoint$' 'func-profile-without-zlib$'
  # Lifetimes measured against the clock: under emulation an object freed
  # at once lives far longer than the 1 us bucket the test expects.
  'func-profile-lifetimes'
  # qemu 7.2 with -R: after mremap(MREMAP_DONTUNMAP) the source range is
  # no longer accessible to the guest (Linux keeps it mapped, reading zero;
  # qemu without -R too).  A realloc that moved a large object's pages
  # leaves such a range, and this test's later malloc that reuses it faults
  # when written.  The census against the profile (func-profile-census)
  # runs.
  'func-census'
  # Needs the loader to map a library again where an unloaded one was;
  # under qemu it does only sometimes ("nothing to test": the case aborts).
  'func-profile-unload:a stack through a library loaded where'
)
CTEST_ARGS=(-R '^(func|unit)-' -E "^($(IFS='|'; echo "${aarch64_left_out[*]}"))")
BUILD_TARGETS=(tested)
configuration aarch64 -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/aarch64-linux-gnu.cmake \
  -DCMAKE_BUILD_TYPE=Release -DSNMALLOC_PROFILE=ON
CTEST_ARGS=()
BUILD_TARGETS=()

if [[ -f rust/Cargo.toml ]]; then
  run_stage "rust: cargo test" \
    env CARGO_TARGET_DIR="$repo_root/build/rust" cargo test --offline --manifest-path rust/Cargo.toml
fi
