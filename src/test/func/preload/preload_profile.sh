#!/usr/bin/env bash
# The profiling shim preloaded into real programs, configured only by the
# environment.  Each program must run as it does without the shim, and its
# profile must be readable by go tool pprof and agree with what it held.
#   preload_profile.sh <libsnmallocshim-profile.so> <signal_target>
set -uo pipefail
shim=$(realpath "$1")
target=$(realpath "$2")
go=$(command -v go || echo /usr/lib/go/bin/go)
[ -x "$go" ] || { echo "FAIL: go not found (golang-go is needed to read profiles)"; exit 1; }
python=$(python3 -c 'import sys; print(sys.executable)')
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
pass() { echo "ok: $*"; }

# inuse_space in bytes of a profile, optionally restricted by pprof options.
inuse_bytes() { # BINARY PROFILE [pprof options...]
  local bin=$1 prof=$2; shift 2
  "$go" tool pprof -raw "$@" "$bin" "$prof" 2>/dev/null |
    awk '/^Samples:/ { on = 1; next } /^Locations/ { on = 0 }
         on && $1 ~ /^[0-9]+$/ && NF >= 4 && $0 ~ /:/ { total += $4 }
         END { printf "%d\n", total }'
}

# --- 1. python3 holding a known amount -------------------------------------
# 100,000 bytearrays of 2,000 bytes (+1 for the terminator) occupy the 2048
# byte class: 204,800,000 bytes.  At R = 64 KiB one 2048-byte object is
# sampled with p = 1 - exp(-2048/65536) = 0.0308; the estimate of n objects'
# bytes has standard deviation 2048 * sqrt(n (1-p)/p) = 3.6 MB.  Objects of
# that size python makes for itself are few (the interpreter's 2 KiB objects
# total well under 1 MB), so the 2048-byte label must show 204.8 MB within
# 5 standard deviations plus 2 MB: a false failure once in ~3.5 million runs.
cat >"$work/hold.py" <<'PY'
import ctypes, hashlib, sys
held = [bytearray(2000) for _ in range(100000)]
for i, b in enumerate(held):
    b[0] = i % 251
digest = hashlib.sha256(bytes(b[0] for b in held)).hexdigest()
lib = ctypes.CDLL(None)
if hasattr(lib, "snmalloc_profile_dump"):
    rc = lib.snmalloc_profile_dump(sys.argv[1].encode())
    if rc != 0:
        print("dump failed", rc); sys.exit(1)
print(digest)
PY
expected_out=$("$python" "$work/hold.py" "$work/unused.pb.gz")
got_out=$(SNMALLOC_PROFILE=rate=65536 LD_PRELOAD="$shim" "$python" "$work/hold.py" "$work/py.pb.gz")
if [ "$got_out" != "$expected_out" ]; then
  fail "python3 under the shim printed '$got_out', without it '$expected_out'"
elif [ ! -s "$work/py.pb.gz" ]; then
  fail "python3: no profile written"
else
  held=$(inuse_bytes "$python" "$work/py.pb.gz" -tagfocus=bytes=2048B)
  expect=204800000
  bound=$((5 * 3600000 + 2000000))
  diff=$((held - expect)); diff=${diff#-}
  if [ "$diff" -le "$bound" ]; then
    pass "python3 held $held bytes in 2048-byte objects by the profile, $expect really (bound $bound)"
  else
    fail "python3 held $held bytes in 2048-byte objects by the profile, $expect really (bound $bound)"
  fi
fi

# --- 1b. large objects at the default rate: the profile matches the heap -----
# python3 holds 256 bytearray(1 << 20), each a 1 MiB + 1 byte request, and
# dumps by signal at the default R = 512 KiB.  The profile's total must be
# within 0.9x..1.1x of what python holds plus the interpreter's own heap,
# measured by the same dump of a run that holds nothing.  Sampling error: an
# object of s = 1 MiB + 16 KiB is sampled with p = 1 - exp(-s/R) = 0.87; the
# estimate of 256 of them has sd s * sqrt(256 (1-p)/p) = 6.4 MB, and the
# baseline's own error is a few MB: 10% of 270 MB is over 4 sd.  With runs
# rounded to a power of two the profile said 2x.
cat >"$work/hold_large.py" <<'PY'
import os, signal, sys, time
count, dump = int(sys.argv[1]), sys.argv[2]
held = [bytearray(1 << 20) for _ in range(count)]
for i, b in enumerate(held):
    b[-1] = i % 251
os.kill(os.getpid(), signal.SIGUSR2)
for _ in range(300):
    if os.path.exists(dump):
        break
    time.sleep(0.1)
print(sum(b[-1] for b in held))
PY
large_total() { # COUNT
  local dump="$work/large.$1.0.pb.gz"
  SNMALLOC_PROFILE=dump_on_signal=SIGUSR2,path="$work/large.$1.%n.pb.gz" \
    LD_PRELOAD="$shim" "$python" "$work/hold_large.py" "$1" "$dump" >/dev/null &&
    inuse_bytes "$python" "$dump"
}
baseline=$(large_total 0)
total=$(large_total 256)
held=$((256 * ((1 << 20) + 1)))
if [ -z "$baseline" ] || [ -z "$total" ]; then
  fail "python3 large objects: no profile (baseline '$baseline', total '$total')"
else
  want=$((held + baseline))
  ratio=$(awk -v t="$total" -v w="$want" 'BEGIN { printf "%.3f", t / w }')
  if awk -v r="$ratio" 'BEGIN { exit !(r >= 0.9 && r <= 1.1) }'; then
    pass "python3 holding $held bytes in 1 MiB + 1 objects: profile $total, held + baseline $baseline = $want (ratio $ratio)"
  else
    fail "python3 holding $held bytes in 1 MiB + 1 objects: profile $total, held + baseline $baseline = $want (ratio $ratio, want 0.9..1.1)"
  fi
  # The requested-size label tells the objects apart from what they occupy.
  requested=$(inuse_bytes "$python" "$work/large.256.0.pb.gz" -tagfocus=requested=1048577B)
  # What a 1 MiB + 1 object occupies: whole 16 KiB chunks, or whole pages
  # in the checks build (its large objects end at a guard page).
  occupied=$(inuse_bytes "$python" "$work/large.256.0.pb.gz" -tagfocus=bytes=1064960B)
  if [ "${occupied:-0}" = 0 ]; then
    occupied=$(inuse_bytes "$python" "$work/large.256.0.pb.gz" -tagfocus=bytes=1052672B)
  fi
  if [ "$requested" -gt 0 ] && [ "$requested" = "$occupied" ]; then
    pass "python3: -tagfocus=requested=1048577B selects the 1 MiB + 16 KiB objects ($requested bytes)"
  else
    fail "python3: requested label selects $requested bytes, bytes label $occupied"
  fi
fi

# --- 1c. a program that allocates nothing, every allocation sampled ---------
# /bin/true makes no allocation, so at rate=1 its profile at exit must be
# empty.  The shim's own copy of the C++ runtime allocates a 71 KiB
# exception pool at load; it comes from a static reserve
# (override/runtime_reserve.h), so it is neither in the profile nor a
# reason to set up the allocator.  (Before that reserve: 80 kB.)
if SNMALLOC_PROFILE=rate=1,dump_at_exit=1,path="$work/true.pb.gz" LD_PRELOAD="$shim" /bin/true &&
  [ -s "$work/true.pb.gz" ]; then
  empty=$(inuse_bytes /bin/true "$work/true.pb.gz")
  if [ "$empty" = 0 ]; then
    pass "/bin/true at rate=1: the profile at exit holds nothing"
  else
    fail "/bin/true at rate=1: the profile at exit holds $empty bytes (the shim's own runtime?)"
  fi
else
  fail "/bin/true at rate=1: no profile written at exit"
fi

# --- 2. a compiler run, dumping at exit ------------------------------------
cat >"$work/prog.cc" <<'CC'
#include <cstdio>
#include <map>
#include <string>
int main() {
  std::map<std::string, int> m;
  for (int i = 0; i < 1000; i++) m[std::to_string(i)] = i;
  long s = 0;
  for (auto& kv : m) s += kv.second;
  std::printf("%ld\n", s);
}
CC
if SNMALLOC_PROFILE=rate=65536,dump_at_exit=1,path="$work/cc.%p.%n.pb.gz" \
   LD_PRELOAD="$shim" g++ -O2 -o "$work/prog" "$work/prog.cc" &&
   [ "$("$work/prog")" = 499500 ]; then
  cc1=$(g++ -print-prog-name=cc1plus)
  biggest=$(ls -S "$work"/cc.*.pb.gz 2>/dev/null | head -1)
  n=$(ls "$work"/cc.*.pb.gz 2>/dev/null | wc -l)
  if [ -z "$biggest" ]; then
    fail "g++: no profile written at exit"
  elif "$go" tool pprof -top -sample_index=alloc_space "$cc1" "$biggest" >"$work/cc.top" 2>&1 &&
       grep -q "Type: alloc_space" "$work/cc.top"; then
    pass "g++ compiled a working program; $n processes wrote profiles at exit; pprof reads them"
  else
    fail "g++: pprof could not read $biggest"; cat "$work/cc.top"
  fi
else
  fail "g++ under the profiling shim did not build a working program"
fi

# --- 3. dump on signal, several times, multi-threaded ------------------------
# 200 blocks of 100 KiB (128 KiB each as large objects, > R so nearly always
# sampled with weight ~1): every dump must show hold_blocks with 200 objects
# within a few (each 128 KiB object is missed with probability
# exp(-131072/65536) = 0.135, and an unsampled one is compensated by the
# weights of the others: sd of the count estimate = sqrt(200*0.135/0.865)
# = 5.6, so +-30 is over 5 sd).
mkfifo "$work/out"
SNMALLOC_PROFILE=rate=65536,dump_on_signal=SIGUSR2,path="$work/sig.%n.pb.gz" \
  LD_PRELOAD="$shim" "$target" "$work/stop" >"$work/out" &
pid=$!
exec 3<"$work/out"
read -r -t 30 line <&3 || line=
if [ "$line" != ready ]; then
  fail "signal target did not start"
else
  for i in 0 1 2; do
    kill -USR2 "$pid"
    for _ in $(seq 100); do [ -s "$work/sig.$i.pb.gz" ] && break; sleep 0.1; done
    if [ ! -s "$work/sig.$i.pb.gz" ]; then
      fail "signal $i: no profile sig.$i.pb.gz"; continue
    fi
    objs=$("$go" tool pprof -top -sample_index=inuse_objects -focus=hold_blocks "$target" "$work/sig.$i.pb.gz" 2>/dev/null |
      awk '$NF == "hold_blocks" { print $4 }' | head -1)
    if [ -n "$objs" ] && [ "$objs" -ge 170 ] && [ "$objs" -le 230 ]; then
      pass "signal $i: complete profile sig.$i.pb.gz, hold_blocks holds $objs objects (200 really)"
    else
      fail "signal $i: hold_blocks shows '${objs:-nothing}' objects, 200 really"
    fi
  done
  touch "$work/stop"
  read -r -t 30 line <&3 || line=
  wait "$pid"; rc=$?
  if [ $rc -ne 0 ] || [ "${line%% *}" != done ]; then
    fail "signal target exited $rc, said '$line'"
  fi
  extra=$(ls "$work"/sig.*.pb.gz | wc -l)
  [ "$extra" -eq 3 ] && pass "three signals, three profiles" || fail "$extra profiles for three signals"
  ls "$work" | grep -q tmp && fail "a temporary dump file was left behind"
fi
exec 3<&-

# --- 4. bad configurations: one message each, profiling off, program fine --
check_bad() { # VALUE EXPECTED-MESSAGE-PART
  local out err
  out=$(printf 'b\na\nc\n' | SNMALLOC_PROFILE="$1" LD_PRELOAD="$shim" sort 2>"$work/err")
  err=$(cat "$work/err")
  if [ "$out" != "$(printf 'a\nb\nc')" ]; then
    fail "SNMALLOC_PROFILE='$1': sort printed '$out'"
  elif [ "$(printf '%s\n' "$err" | grep -c .)" -ne 1 ] || ! grep -q -- "$2" "$work/err" ||
       ! grep -q "profiling stays off" "$work/err"; then
    fail "SNMALLOC_PROFILE='$1': expected one line mentioning '$2', got: $err"
  else
    pass "SNMALLOC_PROFILE='$1': $err"
  fi
}
check_bad "rate=abc" "rate must be"
check_bad "rate=0" "rate must be"
check_bad "rate=99999999999999999999" "rate must be"
check_bad "depth=0" "depth must be"
check_bad "depth=300" "depth must be"
check_bad "path=" "path must be"
check_bad "dump_at_exit=2" "dump_at_exit must be"
check_bad "dump_on_signal=SIGNOPE" "dump_on_signal must be"
check_bad "bogus=1" "unknown key"
check_bad "rate" "expected key=value"
# The keys of a service's automatic dumps, peak profile and leak report
# (../service/service.sh), and size suffixes.
check_bad "dump_every=0" "dump_every must be"
check_bad "dump_every=12x" "dump_every must be"
check_bad "dump_every=9999999999g" "dump_every must be"
check_bad "dump_on_growth=" "dump_on_growth must be"
check_bad "dump_period=0" "dump_period must be"
check_bad "dump_period=1m" "dump_period must be"
check_bad "keep=0" "keep must be"
check_bad "keep=5000" "keep must be"
check_bad "peak_path=" "peak_path must be"
check_bad "leak_report=yes" "leak_report must be"
check_bad "rate=0k" "rate must be"
check_bad "rate=k" "rate must be"
# Nothing set changes nothing: no message, no dump.
( cd "$work" && printf 'x\n' | LD_PRELOAD="$shim" sort >/dev/null 2>"$work/err" )
if [ -s "$work/err" ] || ls "$work"/snmalloc-heap.* >/dev/null 2>&1; then
  fail "without SNMALLOC_PROFILE the shim printed or dumped something: $(cat "$work/err"; ls "$work")"
else
  pass "without SNMALLOC_PROFILE nothing is printed or dumped"
fi

echo "func-preload-profile: $failures failure(s)"
[ "$failures" -eq 0 ]
