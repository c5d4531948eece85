#!/bin/sh
# Guarded sampling against one program per heap bug (guard_bugs.cc), each
# run many times with every allocation sampled and guarded (count mode at
# rate 1, a guard limit far above what the program holds).  A run must end
# in one of two ways:
#   caught:   died by the expected signal (SIGSEGV for accesses, SIGABRT
#             for frees) after one report naming the bug's kind, access,
#             offset, the object's size, and the program's own allocating
#             (and freeing) function at the top of each stack; for an
#             access, its stack first, starting in the accessing function
#             and then main;
#   missed:   printed "survived" and exited 0, no report: possible only
#             where the object's random side leaves the bad byte on a
#             committed page (one byte past or before it: half the runs).
# Kinds caught whatever the side must be caught every time; the others at
# least 3 times in 30 runs (a false failure with probability 4.2e-7).
# Then: a correct program runs clean with objects guarded, and a SIGSEGV
# handler the program installed before guarding still gets its faults.
#
# usage: guard_suite.sh path/to/guard_bugs
set -u
prog=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
ulimit -c 0 # deaths are expected: no core files
guard_env="mode=count,rate=1,guard=1000,guard_per_second=1000000"
failures=0

fail() {
  echo "FAIL: $*"
  sed 's/^/    | /' "$work/err" | head -40
  failures=$((failures + 1))
}

# Frame $2 (default 0) of a report's stack section (the lines after $1),
# as a function name.
top_frame() {
  awk -v header="$1" -v want="${2:-0}" '
    found && index($0, "    #" want " ") == 1 {
      sub(/^ *#[0-9]+ 0x[0-9a-f]+ in /, ""); sub(/\+0x.*/, ""); print; exit }
    found && index($0, "  ") == 1 && index($0, "    ") != 1 { exit }
    index($0, header) == 1 { found = 1 }' "$work/err"
}

# The first section after the report's first line.
first_section() {
  sed -n 2p "$work/err"
}

# run KIND: sets status (128 + signal if killed) from one run.
run() {
  SNMALLOC_PROFILE=$guard_env "$prog" "$1" >"$work/out" 2>"$work/err"
  status=$?
}

# check KIND SIGNAL REPORT_PATTERN FREE_FUNCTION RUNS MIN_CAUGHT [ACCESSOR]
# ACCESSOR: the function of a faulting access, which must be the first
# frame of the report's first stack, called from main.
check() {
  kind=$1 signal=$2 pattern=$3 freer=$4 runs=$5 min_caught=$6 accessor=${7:-}
  caught=0
  i=0
  while [ $i -lt "$runs" ]; do
    i=$((i + 1))
    run "$kind"
    if [ $status -eq 0 ] && grep -qx survived "$work/out" && [ ! -s "$work/err" ]; then
      continue
    fi
    if [ $status -ne $((128 + signal)) ]; then
      fail "$kind run $i: status $status, expected death by signal $signal"
      continue
    fi
    if [ "$(grep -c '^snmalloc: guarded sampling caught' "$work/err")" -ne 1 ] ||
      ! grep -Eq "^snmalloc: guarded sampling caught $pattern" "$work/err"; then
      fail "$kind run $i: no single report matching '$pattern'"
      continue
    fi
    if [ -n "$accessor" ]; then
      if [ "$(first_section)" != "  the faulting access:" ]; then
        fail "$kind run $i: the report's first stack is '$(first_section)', not the faulting access"
        continue
      fi
      top=$(top_frame "  the faulting access:")
      caller=$(top_frame "  the faulting access:" 1)
      if [ "$top" != "$accessor" ] || [ "$caller" != main ]; then
        fail "$kind run $i: faulting access's stack starts '$top', '$caller', not $accessor, main"
        continue
      fi
    fi
    top=$(top_frame "  allocated by thread")
    if [ "$top" != guard_bug_allocate ]; then
      fail "$kind run $i: allocation stack starts in '$top', not guard_bug_allocate"
      continue
    fi
    if [ -n "$freer" ]; then
      top=$(top_frame "  freed by thread")
      if [ "$top" != "$freer" ]; then
        fail "$kind run $i: free stack starts in '$top', not $freer"
        continue
      fi
    elif grep -q "^  freed by thread" "$work/err"; then
      fail "$kind run $i: a free stack for a live object"
      continue
    fi
    caught=$((caught + 1))
  done
  if [ $caught -lt "$min_caught" ]; then
    fail "$kind: caught $caught of $runs runs, expected at least $min_caught"
  else
    echo "ok: $kind caught in $caught of $runs runs"
  fi
}

hex='0x[0-9a-f]+'
obj="in a 64-byte object at $hex"
check overflow-byte 11 "a heap buffer overflow \(write\) at $hex: offset 64 $obj, 0 bytes past its end$" "" 30 3 guard_bug_write_byte
check overflow-page 11 "a heap buffer overflow \(read\) at $hex: offset 4160 $obj, 4096 bytes past its end$" "" 10 10 guard_bug_read_byte
check underflow 11 "a heap buffer underflow \(write\) at $hex: offset -1 $obj, 1 bytes before its start$" "" 30 3 guard_bug_write_byte
check uaf-read 11 "a use after free \(read\) at $hex: offset 8 $obj \(freed\)$" guard_bug_release 10 10 guard_bug_read_byte
check uaf-write 11 "a use after free \(write\) at $hex: offset 16 $obj \(freed\)$" guard_bug_release 10 10 guard_bug_write_byte
check double-free 6 "a double free at $hex: offset 0 $obj \(freed\)$" guard_bug_release 10 10
# The second free's own stack, above the first one's.
if [ "$(top_frame "  freed again here:")" != guard_bug_release_again ]; then
  fail "double-free: the second free's stack does not start in guard_bug_release_again"
fi

run correct
guarded=$(sed -n 's/^guarded //p' "$work/out")
if [ $status -ne 0 ] || [ -s "$work/err" ] || [ "${guarded:-0}" -lt 1000 ]; then
  fail "correct program: status $status, ${guarded:-no} objects guarded (expected >= 1000), stderr above"
else
  echo "ok: correct program ran clean with $guarded objects guarded"
fi

"$prog" chain >"$work/out" 2>"$work/err"
status=$?
if [ $status -ne 139 ] || ! grep -q "^program handler saw 0x" "$work/out" ||
  ! grep -q "^snmalloc: guarded sampling caught a use after free (read)" "$work/err"; then
  fail "chain: status $status; the program's handler must see its own fault and the guarded one kill"
else
  echo "ok: a handler installed before guarding gets the faults outside the slots"
fi

[ $failures -eq 0 ] || { echo "$failures failures"; exit 1; }
echo "all guard checks passed"
