#!/usr/bin/env bash
# Profiling a long-running service, configured only by the environment:
# automatic dumps (dump_every, dump_period, dump_on_growth) bounded by keep,
# the peak-heap profile at exit (peak_path), the leak report at exit
# (leak_report), and size suffixes.
#   service.sh <libsnmallocshim-profile.so> <service_target>
set -uo pipefail
shim=$(realpath "$1")
target=$(realpath "$2")
go=$(command -v go || echo /usr/lib/go/bin/go)
[ -x "$go" ] || { echo "FAIL: go not found (golang-go is needed to read profiles)"; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
pass() { echo "ok: $*"; }
count() { ls "$work"/$1 2>/dev/null | wc -l; }
in_range() { [ "$1" -ge "$2" ] && [ "$1" -le "$3" ]; }

# inuse_space of one function and what it calls (cum, bytes) in a profile:
# a Debug build does not inline the helper that allocates.
inuse_of() { # PROFILE FUNCTION
  "$go" tool pprof -top -sample_index=inuse_space -unit=byte "$target" "$1" 2>/dev/null |
    awk -v f="$2" '$NF == f { sub(/B$/, "", $4); print int($4); found = 1 } END { if (!found) print 0 }' | head -1
}

# --- dump_every: 256 MiB allocated, a profile per 16 MiB ---------------------
# The allocated-bytes estimate moves by one sample's weight (about R = 512
# KiB) at a time and has a relative sd of about 1/sqrt(512): 16 dumps, give
# or take two, and the other allocations of the program are a few KiB.
mkdir "$work/every"
SNMALLOC_PROFILE=dump_every=16m,path="$work/every/e.%n.pb.gz" LD_PRELOAD="$shim" "$target" every 256
n=$(count "every/e.*.pb.gz")
if in_range "$n" 13 19; then pass "dump_every=16m over 256 MiB: $n profiles"
else fail "dump_every=16m over 256 MiB: $n profiles, 16 expected"; fi
first=$(ls "$work"/every | sort -t. -k2 -n | head -1)
if "$go" tool pprof -top "$target" "$work/every/$first" >/dev/null 2>&1; then pass "pprof reads $first"
else fail "pprof cannot read $first"; fi

# --- keep: the same with keep=4 leaves the newest 4 ------------------------
mkdir "$work/keep"
SNMALLOC_PROFILE=dump_every=16m,keep=4,path="$work/keep/k.%n.pb.gz" LD_PRELOAD="$shim" "$target" every 256
kept=$(ls "$work"/keep | sed 's/^k\.\([0-9]*\)\.pb\.gz$/\1/' | sort -n | tr '\n' ' ')
n=$(count "keep/k.*.pb.gz")
newest=$(echo $kept | awk '{ print $NF }')
oldest=$(echo $kept | awk '{ print $1 }')
if [ "$n" -eq 4 ] && [ $((newest - oldest)) -eq 3 ] && [ "$newest" -ge 12 ]; then
  pass "keep=4: the newest four remain ($kept)"
else
  fail "keep=4: files left: $kept"
fi
ls "$work"/keep | grep -q tmp && fail "keep: a temporary file was left behind"

# --- dump_period: 3.5 s at one a second ---------------------------------------
mkdir "$work/period"
SNMALLOC_PROFILE=dump_period=1,path="$work/period/p.%n.pb.gz" LD_PRELOAD="$shim" "$target" period 3500
n=$(count "period/p.*.pb.gz")
if in_range "$n" 3 4; then pass "dump_period=1 over 3.5 s: $n profiles"
else fail "dump_period=1 over 3.5 s: $n profiles, 3 expected"; fi

# --- dump_on_growth: up to 128 MiB by 16 MiB, down, and up again -------------
# Only the first climb passes previous highs: 8 dumps (128 / 16), give or
# take one for sampling; the second climb to the same height adds none.
mkdir "$work/growth"
SNMALLOC_PROFILE=dump_on_growth=16m,rate=64k,path="$work/growth/g.%n.pb.gz" \
  LD_PRELOAD="$shim" "$target" growth
n=$(count "growth/g.*.pb.gz")
if in_range "$n" 7 9; then pass "dump_on_growth=16m to 128 MiB twice: $n profiles"
else fail "dump_on_growth=16m to 128 MiB twice: $n profiles, 8 expected"; fi

# --- peak_path: 256 MiB at A, then 32 MiB at B --------------------------------
# A's estimate has a relative sd of ~3% at R = 512 KiB; the copy may be a
# 32nd below the peak.
SNMALLOC_PROFILE=peak_path="$work/peak.%p.pb.gz",dump_at_exit=1,path="$work/exit.pb.gz" \
  LD_PRELOAD="$shim" "$target" peak
peak=$(ls "$work"/peak.*.pb.gz 2>/dev/null | head -1)
if [ -z "$peak" ]; then
  fail "peak_path: no peak profile written at exit"
else
  a=$(inuse_of "$peak" peak_site_a); b=$(inuse_of "$peak" peak_site_b)
  want=$((256 << 20))
  if [ "$a" -ge $((want * 80 / 100)) ] && [ "$a" -le $((want * 115 / 100)) ] && [ "$b" -eq 0 ]; then
    pass "peak profile at exit: peak_site_a $a bytes (256 MiB held), peak_site_b $b"
  else
    fail "peak profile at exit: peak_site_a $a bytes (256 MiB held), peak_site_b $b (0 expected)"
  fi
  a_now=$(inuse_of "$work/exit.pb.gz" peak_site_a)
  [ "$a_now" -eq 0 ] && pass "exit profile: peak_site_a freed" || fail "exit profile shows peak_site_a $a_now"
fi

# --- leak_report: three leaking functions, in order of size -----------------
SNMALLOC_PROFILE=leak_report=1,rate=4k LD_PRELOAD="$shim" "$target" leak 2>"$work/leak.txt"
rc=$?
[ $rc -eq 3 ] && pass "leak_report leaves the exit status (3)" || fail "exit status $rc, 3 expected"
# A site is a call site: leak_large's two (its blocks and, inlined, the
# array holding them) may both be listed; the first of each function counts.
order=$(grep -oE 'leak_(large|medium|small)|freed_at_exit_site' "$work/leak.txt" | awk '!seen[$0]++' | tr '\n' ' ')
if [ "$order" = "leak_large leak_medium leak_small " ]; then
  pass "leak report lists leak_large, leak_medium, leak_small in that order; the site freed by atexit is gone"
else
  fail "leak report order: '$order'"; cat "$work/leak.txt"
fi
grep -q "snmalloc: leak report: total" "$work/leak.txt" || fail "leak report: no total line"
# Stacks start at the caller of malloc/realloc, as in pprof: the realloc
# site's is sampled inside the allocator, whose frames are left out.
if grep -q "leak_grown" "$work/leak.txt" && ! grep -qE "snmalloc::|realloc" "$work/leak.txt"; then
  pass "leak report: leak_grown listed, no allocator frame above it"
else
  fail "leak report: allocator frames shown, or leak_grown missing"; cat "$work/leak.txt"
fi
# 1024 objects of 4 KiB at R = 4 KiB: p = 1 - e^-1, and the estimate's sd
# is 4096 * sqrt(1024 (1 - p) / p) = 100 KB; 5 sd either side.
large=$(awk '/^  #1 / { print $2 }' "$work/leak.txt")
if [ -n "$large" ] && in_range "$large" $(((4 << 20) - 500000)) $(((4 << 20) + 500000)); then
  pass "leak report: leak_large holds $large bytes (4 MiB)"
else
  fail "leak report: leak_large holds '$large' bytes, 4 MiB expected"
fi

# --- leak_report asked for by configure() after the program's atexit -------
# The report still runs after the program's handler (it was registered when
# the library started), so the site that handler frees is not listed.
SNMALLOC_PROFILE= LD_PRELOAD="$shim" "$target" late-leak 2>"$work/late.txt"
rc=$?
order=$(grep -oE 'leak_(large|medium|small)|freed_at_exit_site' "$work/late.txt" | awk '!seen[$0]++' | tr '\n' ' ')
if [ $rc -eq 3 ] && [ "$order" = "leak_large leak_medium leak_small " ]; then
  pass "leak report configured late runs after the program's atexit handler"
else
  fail "late leak report (status $rc): '$order'"; cat "$work/late.txt"
fi

# --- a reconfiguration without dump_on_signal gives the signal back ----------
if LD_PRELOAD="$shim" "$target" signal-back; then
  pass "dropping dump_on_signal restores the program's own handler"
else
  fail "dropping dump_on_signal: the program's handler did not run (status $?)"
fi

# --- sizes take suffixes ------------------------------------------------------
out=$(printf 'b\na\n' | SNMALLOC_PROFILE=rate=64k,dump_every=1g,dump_on_growth=2G LD_PRELOAD="$shim" sort 2>"$work/err")
if [ "$out" = "$(printf 'a\nb')" ] && [ ! -s "$work/err" ]; then pass "rate=64k,dump_every=1g,dump_on_growth=2G accepted"
else fail "suffixed sizes: $(cat "$work/err")"; fi

# (Bad values of these keys are checked with the others in
# ../preload/preload_profile.sh.)

echo "service: $failures failure(s)"
[ "$failures" -eq 0 ]
