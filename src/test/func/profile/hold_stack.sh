#!/usr/bin/env bash
# A sampled stack end to end, through the stack walker the program was
# built with: hold_and_dump's objects (every one sampled) must be found by
# go tool pprof under the stack hold_objects <- main, with the right count.
#   hold_stack.sh <hold_and_dump program> [emulator, when cross-built]
set -uo pipefail
prog=$(realpath "$1")
run=("${@:2}" "$prog")
go=$(command -v go || echo /usr/lib/go/bin/go)
[ -x "$go" ] || { echo "FAIL: go not found (golang-go is needed to read profiles)"; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
SNMALLOC_PROFILE=mode=count,rate=1 "${run[@]}" "$work/a.pb.gz" "$work/b.pb.gz" >"$work/out" 2>"$work/err"
status=$?
if [ $status -ne 0 ] || [ "$(cat "$work/out")" != "dumps 0 0" ]; then
  echo "FAIL: status $status, printed '$(cat "$work/out")'"; cat "$work/err"; exit 1
fi
# -traces: each distinct stack, innermost frame first, one a line (the
# first after a value).  Every stack whose top frame is hold_objects must
# go on to main, and -top must count 1502 objects under hold_objects (1000
# + 500 and its two arrays).
"$go" tool pprof -traces "$prog" "$work/b.pb.gz" >"$work/traces" 2>&1 ||
  { echo "FAIL: pprof could not read the profile"; head "$work/traces"; exit 1; }
read -r good bad < <(awk '
  function name(line) { sub(/^ *([0-9.]+[kMG]?B? +)?/, "", line); sub(/\(.*/, "", line); return line }
  /^-+\+-+$/ { depth = 0; top = ""; next }
  /^ +[a-z]+: / { next }
  { depth++; f = name($0)
    if (depth == 1) top = f
    else if (depth == 2 && top == "hold_objects") { if (f == "main") good++; else bad++ } }
  END { print good + 0, bad + 0 }' "$work/traces")
objects=$("$go" tool pprof -sample_index=inuse_objects -top -focus=hold_objects \
  "$prog" "$work/b.pb.gz" 2>/dev/null | awk '$1 ~ /^[0-9]+$/ && / hold_objects/ { print $4; exit }')
if [ "$good" -lt 1 ] || [ "$bad" -ne 0 ] || [ "$objects" != 1502 ]; then
  echo "FAIL: stacks hold_objects <- main $good, hold_objects <- other $bad; $objects objects under hold_objects, expected 1502"
  head -40 "$work/traces"
  exit 1
fi
echo "ok: 1502 objects under hold_objects, its $good stacks all hold_objects <- main"
