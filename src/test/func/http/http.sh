#!/usr/bin/env bash
# The HTTP endpoint (SNMALLOC_PROFILE=http=...) read by the real clients:
#   - go tool pprof -top URL of heap, allocs, peak, heap?seconds=N,
#     lifetimes and lifetimes?seconds=N, and footprint, the sites and
#     totals checked against what http_target holds;
#   - promtool check metrics on /metrics; a Prometheus server scraping it,
#     read back through its query API;
#   - bad, slow, oversized and too many clients (bad_clients.py), while the
#     program works, its heap checked afterwards;
#   - fork: the child has no server; exit stops it.
#   http.sh <libsnmallocshim-profile.so> <http_target>
set -uo pipefail
shim=$(realpath "$1")
target=$(realpath "$2")
here=$(cd "$(dirname "$0")" && pwd)
go=$(command -v go || echo /usr/lib/go/bin/go)
for tool in "$go" curl prometheus promtool python3; do
  command -v "$tool" >/dev/null || { echo "FAIL: $tool not found (bash scripts/setup.sh installs it)"; exit 1; }
done
work=$(mktemp -d)
target_pid="" prometheus_pid=""
cleanup() {
  [ -n "$prometheus_pid" ] && kill "$prometheus_pid" 2>/dev/null && wait "$prometheus_pid" 2>/dev/null
  [ -n "$target_pid" ] && kill "$target_pid" 2>/dev/null && wait "$target_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
pass() { echo "ok: $*"; }
MiB=1048576
RATE=65536
TIMEOUT=2

# Within k standard deviations of the sampled estimate of `bytes` held in
# objects much smaller than R: sd = sqrt(bytes * R) (docs/profiling.md).
within_sd() { # VALUE EXPECTED K
  python3 -c "import math,sys; v,e,k=map(float,sys.argv[1:]); sys.exit(0 if abs(v-e) <= k*math.sqrt(e*$RATE) else 1)" "$@"
}

# A site's cum bytes in `go tool pprof -top` output (0 if absent).
site_bytes() { # TOP_FILE FUNCTION
  awk -v f="$2" '$NF == f { v = $4; sub(/B$/, "", v); print int(v); found = 1; exit } END { if (!found) print 0 }' "$1"
}

# go tool pprof -top of a URL into a file; false if pprof failed.
pprof_top() { # NAME URL [pprof options]
  local name=$1 url=$2
  shift 2
  timeout 120 "$go" tool pprof -top -unit=byte "$@" "$url" >"$work/$name.top" 2>"$work/$name.err"
}

# --- start the program under the shim, serving on a free loopback port -----
mkfifo "$work/in"
SNMALLOC_PROFILE=rate=$RATE,http=:0,http_timeout=$TIMEOUT HTTP_TARGET_RATE=$RATE \
  LD_PRELOAD="$shim" "$target" <"$work/in" >"$work/out" 2>"$work/err" &
target_pid=$!
exec 3>"$work/in"
# Wait (bounded) for a line of the program's output matching a pattern.
await() { # PATTERN SECONDS
  local deadline=$((SECONDS + $2))
  while [ $SECONDS -lt $deadline ]; do
    grep -q "$1" "$work/out" 2>/dev/null && return 0
    kill -0 "$target_pid" 2>/dev/null || return 1
    sleep 0.2
  done
  return 1
}
tell() { echo "$1" >&3; }
if ! await '^ready' 120; then
  fail "http_target did not start"; cat "$work/err"; exit 1
fi
port=$(awk '$1 == "port" { print $2 }' "$work/out")
announced=$(grep -c "serving heap profiles on http://127.0.0.1:$port/debug/pprof/" "$work/err")
if [ "$port" -gt 0 ] && [ "$announced" -eq 1 ]; then pass "http=:0 chose port $port, said once on stderr"
else fail "port '$port', stderr: $(cat "$work/err")"; fi
base=http://127.0.0.1:$port

# --- go tool pprof: heap ---------------------------------------------------
held_a=$((64 * MiB)) held_b=$((16 * MiB))
if pprof_top heap "$base/debug/pprof/heap"; then
  a=$(site_bytes "$work/heap.top" site_a); b=$(site_bytes "$work/heap.top" site_b)
  # 5 sd: a false failure once in ~10^6 runs per site.
  if within_sd "$a" $held_a 5 && within_sd "$b" $held_b 5; then
    pass "heap: site_a $a B (holds $held_a), site_b $b B (holds $held_b)"
  else
    fail "heap: site_a $a B (holds $held_a), site_b $b B (holds $held_b)"; cat "$work/heap.top"
  fi
  grep -q "^Type: inuse_space" "$work/heap.top" || fail "heap: default type is not inuse_space"
else
  fail "go tool pprof $base/debug/pprof/heap: $(cat "$work/heap.err")"
fi

# The endpoint serves the bytes a dump writes: the same profile, read back.
curl -sf -m 60 -o "$work/heap.pb.gz" "$base/debug/pprof/heap"
if gzip -t "$work/heap.pb.gz" 2>/dev/null &&
  "$go" tool pprof -top -unit=byte "$work/heap.pb.gz" 2>/dev/null | grep -q site_a; then
  pass "curl gets a gzipped profile pprof reads"
else
  fail "curl's /debug/pprof/heap is not a gzipped profile"
fi

# --- allocs: alloc_space by default ------------------------------------------
if pprof_top allocs "$base/debug/pprof/allocs"; then
  a=$(site_bytes "$work/allocs.top" site_a)
  if grep -q "^Type: alloc_space" "$work/allocs.top" && within_sd "$a" $held_a 5; then
    pass "allocs: Type alloc_space, site_a allocated $a B ($held_a)"
  else
    fail "allocs: site_a $a B, $(grep ^Type "$work/allocs.top")"
  fi
else
  fail "go tool pprof $base/debug/pprof/allocs: $(cat "$work/allocs.err")"
fi

# --- heap?seconds=N: what changed over N seconds --------------------------
# The program grows by 32 MiB at grow_site 3 s into a 8 s window; site_a,
# held all along, is no part of the difference.
held_c=$((32 * MiB))
pprof_top delta "$base/debug/pprof/heap?seconds=8" &
delta_pid=$!
sleep 3
tell grow
await '^grown' 60 || fail "grow did not finish"
if wait $delta_pid; then
  a=$(site_bytes "$work/delta.top" site_a); c=$(site_bytes "$work/delta.top" grow_site)
  if within_sd "$c" $held_c 5 && [ "$a" -eq 0 ]; then
    pass "heap?seconds=8: grow_site +$c B ($held_c), site_a $a B"
  else
    fail "heap?seconds=8: grow_site $c B ($held_c), site_a $a B (0)"; cat "$work/delta.top"
  fi
  grep -Eq "^Duration: [78](\.[0-9]+)?s" "$work/delta.top" || fail "delta duration: $(grep ^Duration "$work/delta.top")"
else
  fail "go tool pprof heap?seconds=8: $(cat "$work/delta.err")"
fi

# --- /metrics: promtool, then a Prometheus server --------------------------
curl -sf -m 60 -o "$work/metrics.txt" "$base/metrics"
if promtool check metrics <"$work/metrics.txt" >"$work/promtool.out" 2>&1; then
  pass "promtool check metrics accepts /metrics ($(grep -c '^snmalloc_' "$work/metrics.txt") series)"
else
  fail "promtool check metrics: $(cat "$work/promtool.out")"
fi
for name in snmalloc_live_bytes snmalloc_profile_samples_total snmalloc_profile_live_samples \
  snmalloc_profile_dumps_total snmalloc_profile_dump_failures_total; do
  grep -q "^# TYPE $name " "$work/metrics.txt" || fail "/metrics lacks $name"
done
grep -q '^snmalloc_sizeclass_live_objects{object_size="4096"} ' "$work/metrics.txt" ||
  fail "/metrics lacks the 4096-byte sizeclass series"

prom_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat >"$work/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: snmalloc
    static_configs:
      - targets: ['127.0.0.1:$port']
EOF
prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/tsdb" \
  --web.listen-address="127.0.0.1:$prom_port" >"$work/prometheus.log" 2>&1 &
prometheus_pid=$!
# What the program holds now: site_a, site_b and grow_site, in 4 KiB objects.
held=$((held_a + held_b + held_c))
query() { # PROMQL -> the value of the first series, or nothing
  curl -sf -m 60 -G "http://127.0.0.1:$prom_port/api/v1/query" --data-urlencode "query=$1" |
    python3 -c 'import json,sys; r=json.load(sys.stdin)["data"]["result"]; print(r[0]["value"][1] if r else "")' 2>/dev/null
}
live="" up=""
for _ in $(seq 120); do
  up=$(query 'up{job="snmalloc"}')
  live=$(query 'snmalloc_live_bytes{job="snmalloc"}')
  [ "$up" = 1 ] && [ -n "$live" ] && break
  sleep 0.5
done
objects=$(query 'snmalloc_sizeclass_live_objects{job="snmalloc",object_size="4096"}')
samples=$(query 'snmalloc_profile_samples_total{job="snmalloc"}')
live_samples=$(query 'snmalloc_profile_live_samples{job="snmalloc"}')
live_samples=${live_samples%.*}
# snmalloc_live_bytes is an upper bound (snmalloc_stats.h), and counts more
# than the program holds:
#  - each sampled 4 KiB object sits in an 8 KiB profile-pool block (its
#    record below it, at the object's 4 KiB alignment): 4 KiB per sample;
#  - the object a sample point fell in goes back to its slab unused, and a
#    slab counts it live until its next refill or release, which a full
#    slab of a growing heap may never have: up to 4 KiB more per sample
#    (measured: 462 such objects with 1742 samples);
#  - one slab's batch per class and thread cached in free lists (about
#    16 KiB for each of ~20 small classes here), the program's pointer
#    arrays (224 KiB), stdio, the server thread's buffers: under 2 MiB.
# So: at least what is held plus 4 KiB per live sample, at most 4 KiB per
# live sample and 2 MiB above that (measured: 1.9 to 3.4 MB above it).
lower=$((held + ${live_samples:-0} * 4096))
upper=$((lower + ${live_samples:-0} * 4096 + 2 * MiB))
echo "snmalloc_live_bytes $live, held $held, $live_samples live samples: $((${live:-0} - lower)) B above the lower bound"
if [ "$up" = 1 ] && [ -n "$live" ] && [ "${live%.*}" -ge "$lower" ] && [ "${live%.*}" -le "$upper" ]; then
  pass "Prometheus scraped snmalloc_live_bytes = $live (holds $held, $live_samples samples: $lower .. $upper)"
else
  fail "Prometheus: up='$up' snmalloc_live_bytes='$live' (holds $held, $live_samples samples: $lower .. $upper)"; tail -5 "$work/prometheus.log"
fi
# The 4096-byte class counts the unsampled objects (n exp(-4096/R) of n,
# binomial: 5 sd either way), plus the returned sample points and cached
# objects above.
range=$(python3 -c "import math; n=$held/4096; p=1-math.exp(-4096/$RATE); sd=math.sqrt(n*p*(1-p)); print(int(n*(1-p)-5*sd), int(n*(1-p)+5*sd+${live_samples:-0}+256))")
if [ -n "$objects" ] && [ -n "$samples" ] && [ "${samples%.*}" -gt 0 ] &&
  python3 -c "import sys; lo, hi = map(int, '$range'.split()); sys.exit(0 if lo <= float('$objects') <= hi else 1)"; then
  pass "Prometheus: 4096-byte class $objects live objects (expected $range), $samples samples taken"
else
  fail "Prometheus: 4096-byte class '$objects' (expected $range), samples '$samples'"
fi
kill "$prometheus_pid"; wait "$prometheus_pid" 2>/dev/null; prometheus_pid=""

# --- peak: 128 MiB at peak_site, freed -------------------------------------
tell peak
await '^peaked' 60 || fail "peak did not finish"
held_peak=$((128 * MiB))
if pprof_top peak "$base/debug/pprof/peak" && pprof_top after "$base/debug/pprof/heap"; then
  p=$(site_bytes "$work/peak.top" peak_site); now=$(site_bytes "$work/after.top" peak_site)
  # The copy is taken within a 32nd of the peak (peak_profile.h): 5 sd
  # below, and a 32nd on top of that.
  lower=$(python3 -c "import math; print(int($held_peak*31/32 - 5*math.sqrt($held_peak*$RATE)))")
  upper=$(python3 -c "import math; print(int($held_peak + 5*math.sqrt($held_peak*$RATE)))")
  if [ "$p" -ge "$lower" ] && [ "$p" -le "$upper" ] && [ "$now" -eq 0 ]; then
    pass "peak: peak_site $p B ($held_peak; $lower..$upper), now $now B"
  else
    fail "peak: peak_site $p B ($lower..$upper), in the heap now $now B"; cat "$work/peak.top"
  fi
else
  fail "go tool pprof peak: $(cat "$work/peak.err" "$work/after.err")"
fi

# --- lifetimes: the whole profile, and ?seconds=N the frees of a window --
# A count's estimate for n objects of OBJECT bytes, each sampled with
# p = 1 - exp(-OBJECT/R) and weighted 1/p, has sd sqrt(n (1 - p) / p).
within_count_sd() { # VALUE N K
  python3 -c "import math,sys; v,n,k=map(float,sys.argv[1:]); p=-math.expm1(-4096/$RATE); sys.exit(0 if abs(v-n) <= k*math.sqrt(n*(1-p)/p) else 1)" "$@"
}
lifetimes_top() { # NAME URL SAMPLE_INDEX [pprof options]
  local name=$1 url=$2 index=$3
  shift 3
  timeout 120 "$go" tool pprof -top -sample_index="$index" "$@" "$url" >"$work/$name.top" 2>"$work/$name.err"
}
site_value() { # TOP_FILE FUNCTION: its cumulative value, a count (0 if absent)
  # Cumulative, not flat: without inlining (the Debug build) the site
  # allocates through a helper that holds the flat value.
  awk -v f="$2" '$NF == f { print int($4); found = 1; exit } END { if (!found) print 0 }' "$1"
}
# peak_site's 128 MiB made and freed again 2 s into a 5 s window: in the
# window, its frees on their own thread; site_a, held all along, no frees.
peak_objects=$((128 * MiB / 4096))
lifetimes_top window "$base/debug/pprof/lifetimes?seconds=5" freed_objects &
window_pid=$!
sleep 2
tell peak
for _ in $(seq 150); do [ "$(grep -c '^peaked' "$work/out")" -ge 2 ] && break; sleep 0.2; done
[ "$(grep -c '^peaked' "$work/out")" -ge 2 ] || fail "the second peak did not finish"
if wait $window_pid; then
  f=$(site_value "$work/window.top" peak_site); a=$(site_value "$work/window.top" site_a)
  if within_count_sd "$f" $peak_objects 5 && [ "$a" -eq 0 ]; then
    pass "lifetimes?seconds=5: peak_site freed $f objects ($peak_objects), site_a $a"
  else
    fail "lifetimes?seconds=5: peak_site freed $f ($peak_objects), site_a $a (0)"; cat "$work/window.top"
  fi
  grep -Eq "^Duration: [45](\.[0-9]+)?s" "$work/window.top" || fail "lifetimes window duration: $(grep ^Duration "$work/window.top")"
else
  fail "go tool pprof lifetimes?seconds=5: $(cat "$work/window.err")"
fi
# The whole profile: both peaks' frees, none by another thread; site_a's
# 64 MiB live since the start, older than a second.
if lifetimes_top freed "$base/debug/pprof/lifetimes" freed_objects &&
  lifetimes_top other "$base/debug/pprof/lifetimes" freed_objects -tagfocus=freed_by=other_thread &&
  lifetimes_top live "$base/debug/pprof/lifetimes" live_objects '-tagfocus=age=^(<10s|<1min|<10min)$'; then
  f=$(site_value "$work/freed.top" peak_site); o=$(site_value "$work/other.top" peak_site)
  l=$(site_value "$work/live.top" site_a)
  if within_count_sd "$f" $((2 * peak_objects)) 5 && [ "$o" -eq 0 ] &&
    within_count_sd "$l" $((64 * MiB / 4096)) 5; then
    pass "lifetimes: peak_site freed $f ($((2 * peak_objects))), by another thread $o; site_a live $l"
  else
    fail "lifetimes: peak_site freed $f ($((2 * peak_objects))), other thread $o (0), site_a live $l"
    cat "$work/freed.top" "$work/live.top"
  fi
else
  fail "go tool pprof lifetimes: $(cat "$work/freed.err" "$work/other.err" "$work/live.err")"
fi

# --- footprint: the process's resident memory, site_a's 64 MiB in it -----
# Its total against the target's VmRSS read just before and after: with
# every node shown, pprof's "Showing nodes accounting for N" (in bytes with
# -unit=byte).  The resident set may
# still be moving when it is read (the checks build gave back 110 MB during
# one dump), so the dump is taken again until VmRSS holds within 2% across
# it, at most five times.
footprint_read=0
for attempt in 1 2 3 4 5; do
  rss_before=$(awk '/^VmRSS:/ { print $2 * 1024 }' "/proc/$target_pid/status")
  footprint_read=0
  pprof_top footprint "$base/debug/pprof/footprint" -nodecount=100000 -nodefraction=0 || break
  footprint_read=1
  rss_after=$(awk '/^VmRSS:/ { print $2 * 1024 }' "/proc/$target_pid/status")
  python3 -c "import sys; b,e=map(float,sys.argv[1:]); sys.exit(0 if abs(b - e) <= 0.02 * max(b, e) else 1)" \
    "$rss_before" "$rss_after" && break
  sleep 1
done
if [ "$footprint_read" = 1 ]; then
  # The rows' signed sum: pprof's "of N total" adds their absolute values,
  # and the row of live objects off the samples' estimate may be negative.
  total=$(awk '/^Showing nodes accounting for/ { v = $5; sub(/B,$/, "", v); print int(v); exit }' "$work/footprint.top")
  a=$(site_bytes "$work/footprint.top" site_a)
  if python3 -c "import sys; t,b,e=map(float,sys.argv[1:]); sys.exit(0 if abs(t - (b + e) / 2) <= 0.05 * (b + e) / 2 else 1)" \
    "$total" "$rss_before" "$rss_after" && within_sd "$a" $((64 * MiB)) 5 &&
    grep -q 'snmalloc: metadata' "$work/footprint.top" && grep -q '\[binary: ' "$work/footprint.top"; then
    pass "footprint: total $total, VmRSS $rss_before .. $rss_after, site_a $a"
  else
    fail "footprint: total $total, VmRSS $rss_before .. $rss_after, site_a $a ($((64 * MiB)))"
    cat "$work/footprint.top"
  fi
else
  fail "go tool pprof footprint: $(cat "$work/footprint.err")"
fi

# --- bad clients, while the program works ------------------------------------
tell "many 150000"
await '^many' 60 || fail "many did not finish"
before=$(curl -sf -m 60 "$base/metrics" | awk '$1 == "snmalloc_live_bytes" { print $2 }')
tell "work 15"
if python3 "$here/bad_clients.py" "$port" "$TIMEOUT"; then pass "bad clients (above)"
else fail "bad clients (above)"; fi
await '^work' 120 || fail "work did not finish"
grep -q '^work ok' "$work/out" || fail "the program's work was harmed: $(grep ^work "$work/out")"
tell check
await '^heap' 60 || fail "check did not finish"
if grep -q '^heap ok' "$work/out"; then pass "the program's work and heap are unharmed"
else fail "heap check: $(grep ^heap "$work/out")"; fi
after=$(curl -sf -m 60 "$base/metrics" | awk '$1 == "snmalloc_live_bytes" { print $2 }')
# The work thread has exited (its frees are recounted), the server's
# buffers are freed: what remains is what was held before, within 2 MiB.
if [ -n "$after" ] && [ "$after" -le $((before + 2 * MiB)) ]; then
  pass "live bytes after the attacks: $after (before: $before)"
else
  fail "live bytes grew from $before to $after"
fi

# --- fork: the child has no server, may start its own; the parent serves on
tell fork
await '^fork' 60 || fail "fork did not finish"
if grep -q '^fork ok' "$work/out" && curl -sf -m 60 -o /dev/null "$base/metrics"; then
  pass "fork: no server in the child until it starts one; the parent serves on"
else
  fail "fork: $(grep ^fork "$work/out")"
fi

# --- stop at exit ----------------------------------------------------------
tell quit
exec 3>&-
status=0
for _ in $(seq 100); do kill -0 "$target_pid" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$target_pid" 2>/dev/null; then fail "http_target did not exit"
else wait "$target_pid"; status=$?; target_pid=""; fi
if [ "$status" -eq 0 ] && ! curl -s -m 10 -o /dev/null "$base/metrics"; then pass "exit 0; the port is closed"
else fail "exit status $status, or the port still answers"; fi

[ "$failures" -eq 0 ] && echo "http.sh: all passed" || echo "http.sh: $failures failed"
[ "$failures" -eq 0 ]
