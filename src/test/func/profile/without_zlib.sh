#!/usr/bin/env bash
# A dump where libz.so.1 cannot be loaded: the profile is written
# uncompressed, stderr says so once however many dumps follow, and
# go tool pprof reads it and names the holding function.  The loader is
# made to fail for real: LD_LIBRARY_PATH puts an empty libz.so.1 first,
# which dlopen finds and rejects.  With the real zlib, the same program's
# dumps are gzip and nothing is said.
#   without_zlib.sh <without_zlib program>
set -uo pipefail
prog=$(realpath "$1")
go=$(command -v go || echo /usr/lib/go/bin/go)
[ -x "$go" ] || { echo "FAIL: go not found (golang-go is needed to read profiles)"; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
pass() { echo "ok: $*"; }
is_gzip() { [ "$(head -c 2 "$1" | od -An -tx1 | tr -d ' ')" = 1f8b ]; }

if ldd "$prog" | grep -q 'libz\.so'; then
  fail "the program links libz itself, so dlopen would not fail"
fi

mkdir "$work/broken"
: >"$work/broken/libz.so.1"
LD_LIBRARY_PATH="$work/broken" SNMALLOC_PROFILE=mode=count,rate=1 \
  "$prog" "$work/a.pb" "$work/b.pb" >"$work/out" 2>"$work/err"
status=$?
said=$(grep -c '^snmalloc: cannot load libz.so.1 (.*); profiles are written uncompressed$' "$work/err")
if [ $status -ne 0 ] || [ "$(cat "$work/out")" != "dumps 0 0" ]; then
  fail "without zlib: status $status, printed '$(cat "$work/out")', expected 'dumps 0 0'"
elif [ "$said" -ne 1 ] || [ "$(wc -l <"$work/err")" -ne 1 ]; then
  fail "without zlib: stderr must say it once, said it $said times:"
  sed 's/^/    | /' "$work/err"
else
  pass "two dumps without zlib, said once: $(cat "$work/err")"
fi
for f in a b; do
  if [ ! -s "$work/$f.pb" ] || is_gzip "$work/$f.pb"; then
    fail "dump $f: missing or still gzip"
    continue
  fi
  # 1000 objects of 3000 bytes (3072-byte class) in the first dump, and
  # 500 of 700 (768) more in the second, all sampled (count mode, rate 1).
  top=$("$go" tool pprof -raw "$prog" "$work/$f.pb" 2>"$work/pprof.err")
  if [ $? -ne 0 ]; then
    fail "dump $f: go tool pprof could not read it: $(head -3 "$work/pprof.err")"
  elif ! grep -q 'hold_objects' <<<"$top"; then
    fail "dump $f: pprof does not name hold_objects"
  else
    pass "dump $f: uncompressed, $(stat -c %s "$work/$f.pb") bytes, read by pprof, names hold_objects"
  fi
done
objects=$("$go" tool pprof -sample_index=inuse_objects -top -focus=hold_objects \
  "$prog" "$work/b.pb" 2>/dev/null | awk '$1 ~ /^[0-9]+$/ && / hold_objects/ { print $4; exit }')
if [ "$objects" != 1502 ]; then
  fail "second dump: $objects objects held by hold_objects, expected 1502 (and the two arrays of pointers)"
else
  pass "second dump: 1502 objects held by hold_objects"
fi

SNMALLOC_PROFILE=mode=count,rate=1 "$prog" "$work/c.pb" "$work/d.pb" >"$work/out" 2>"$work/err"
status=$?
if [ $status -ne 0 ] || [ -s "$work/err" ] || ! is_gzip "$work/c.pb" || ! is_gzip "$work/d.pb"; then
  fail "with zlib: status $status, dumps gzip: $(is_gzip "$work/c.pb" && echo yes || echo no), stderr:"
  sed 's/^/    | /' "$work/err"
else
  pass "with zlib: gzip dumps, nothing said"
fi

[ $failures -eq 0 ] || { echo "$failures failures"; exit 1; }
echo "all checks passed"
