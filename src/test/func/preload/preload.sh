#!/usr/bin/env bash
# LD_PRELOADs the shim into real programs and checks they work exactly as
# without it, and that they really ran on snmalloc.
#
#   preload.sh SHIM python|sort|compiler
#
# How "really ran on snmalloc" is shown, without ltrace:
#  - The dynamic linker's own log (LD_DEBUG=bindings) records, for each
#    symbol reference it resolves, which object it bound it to. We require
#    that the program's (or libc's) references to malloc and free were bound
#    to the shim. This is the mechanism of interposition itself, so it
#    holds for any program, however short-lived.
#  - For sort, /proc/PID/maps of the running process must list the shim:
#    sort reads its input from a FIFO, so it waits, alive, while we look.
#  - For python3, the process checks itself (python_workload.py): the
#    shim is mapped, malloc resolves to the shim's, and a buffer Python got
#    from malloc is one the shim's malloc_usable_size recognises.
# Exit status 77 (ctest: skipped) if a needed program is missing.
set -euo pipefail

shim=$(readlink -f "$1")
case_name=$2
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/snmalloc-preload.XXXXXX")
trap 'rm -rf "$work"' EXIT

fail() {
  echo "FAIL ($case_name): $*" >&2
  exit 1
}

require_program() {
  command -v "$1" >/dev/null || { echo "SKIP: $1 not found" >&2; exit 77; }
}

[[ -f $shim ]] || fail "no shim at $1"

# Runs "$@" with the shim preloaded and the dynamic linker logging symbol
# bindings into $work/ld.<log>.<pid> (one file per process, children too).
run_preloaded_logged() {
  local log=$1
  shift
  LD_PRELOAD=$shim LD_DEBUG=bindings LD_DEBUG_OUTPUT="$work/ld.$log" "$@"
}

# Requires that in some process of the run named $1, the references of the
# binary whose name contains $2 to malloc and free were bound to the shim.
require_bound_to_shim() {
  local log=$1 binary=$2 symbol
  for symbol in malloc free; do
    if ! cat "$work"/ld."$log".* |
        grep -F "to $shim [0]: normal symbol \`$symbol'" |
        grep -E "binding file [^ ]*$binary[^ ]* \\[" >/dev/null; then
      fail "no binding of $symbol to the shim in a $binary process"
    fi
  done
}

python_case() {
  # The pyenv shim is a script; use the real interpreter so the process we
  # check is python3 itself.
  local python
  python=$(readlink -f /usr/bin/python3 2>/dev/null || true)
  [[ -x $python ]] || { require_program python3; python=$(python3 -c 'import sys; print(sys.executable)'); }
  export PYTHONHASHSEED=0
  "$python" "$here/python_workload.py" >"$work/plain.out"
  run_preloaded_logged python "$python" "$here/python_workload.py" \
    --check-allocator "$shim" >"$work/preloaded.out"
  cmp "$work/plain.out" "$work/preloaded.out" ||
    fail "python3 printed different results with the shim"
  require_bound_to_shim python 'python3'
  cat "$work/preloaded.out"
}

sort_case() {
  require_program sort
  # 2 million lines of pseudo-random text (about 40 MB), made by awk
  # without the shim, sorted in parallel threads with a small buffer so sort
  # also merges temporary files.
  awk 'BEGIN { srand(7); for (i = 0; i < 2000000; i++)
               printf "%08x %d %s\n", int(rand() * 4294967295), i, substr("qwertyuiopasdfgh", 1 + i % 9) }' \
    >"$work/input"
  local sort_options=(--parallel=2 -S 16M -T "$work" -k1,1 -k2,2n)
  LC_ALL=C sort "${sort_options[@]}" "$work/input" >"$work/plain.out"

  mkfifo "$work/input.fifo"
  # A simple command (not a function), so $! is sort's own pid.
  LC_ALL=C LD_PRELOAD=$shim LD_DEBUG=bindings LD_DEBUG_OUTPUT="$work/ld.sort" \
    sort "${sort_options[@]}" "$work/input.fifo" >"$work/preloaded.out" &
  local pid=$!
  # Opening the FIFO for writing waits until sort has opened it for
  # reading, so sort is running; it then waits for input while we look.
  exec 3>"$work/input.fifo"
  grep -q "$shim" "/proc/$pid/maps" || fail "shim not mapped into sort"
  cat "$work/input" >&3
  exec 3>&-
  wait "$pid" || fail "sort with the shim exited with $?"

  cmp "$work/plain.out" "$work/preloaded.out" ||
    fail "sort output differs with the shim"
  require_bound_to_shim sort 'sort'
  echo "sort: $(wc -l <"$work/preloaded.out") lines identical, shim mapped and bound"
}

compiler_case() {
  require_program g++
  # Assembly must be identical with and without the shim (GCC's output does
  # not depend on heap addresses: they already differ between runs under
  # ASLR). The program built with the shim in the compiler must run right.
  g++ -std=c++17 -O2 -S -o "$work/plain.s" "$here/sample_program.cc"
  run_preloaded_logged gxx g++ -std=c++17 -O2 -S -o "$work/preloaded.s" \
    "$here/sample_program.cc"
  cmp "$work/plain.s" "$work/preloaded.s" ||
    fail "g++ produced different assembly with the shim"
  # cc1plus does the compiling; it is the process that must be ours.
  require_bound_to_shim gxx 'cc1plus'

  LD_PRELOAD=$shim g++ -std=c++17 -O2 -o "$work/program" "$here/sample_program.cc"
  g++ -std=c++17 -O2 -o "$work/reference" "$here/sample_program.cc"
  "$work/reference" >"$work/expected.out"
  LD_PRELOAD=$shim "$work/program" >"$work/actual.out" ||
    fail "the program compiled with the shim failed"
  cmp "$work/expected.out" "$work/actual.out" ||
    fail "the program compiled with the shim printed something else"
  echo "compiler: assembly identical, cc1plus bound to the shim, program output: $(cat "$work/actual.out")"
}

case $case_name in
  python) python_case ;;
  sort) sort_case ;;
  compiler) compiler_case ;;
  *) fail "unknown case (python, sort or compiler)" ;;
esac
