#!/usr/bin/env bash
# Compiles every header under src/snmalloc on its own (a translation unit
# of one #include), so each header includes what it uses.  Fails naming
# every header that does not compile, with its first errors.
#
# Usage: check_headers_alone.sh [--mentioning REGEX] CXX SRC_DIR [FLAGS...]
#   SRC_DIR is the folder holding snmalloc/; FLAGS are added to each
#   compile (for example -DSNMALLOC_PROFILE=1).  --mentioning compiles
#   only the headers whose text matches REGEX (grep -E): a build choice
#   is tested where it is read, without compiling every header again.
set -uo pipefail
mentioning=
if [[ ${1-} == --mentioning ]]; then
  mentioning=$2
  shift 2
fi
cxx=$1 src=$2
shift 2
export cxx src
flags=("$@")

compile_one() {
  local header=$1 out
  shift
  if ! out=$(echo "#include \"$header\"" |
    "$cxx" -std=c++17 "$@" -I "$src" -fsyntax-only -x c++ - 2>&1); then
    echo "FAIL $header"
    grep -m 3 'error' <<<"$out"
    return 1
  fi
}
export -f compile_one

if [[ -n $mentioning ]]; then
  mapfile -t headers < <(cd "$src" && grep -rlE --include='*.h' -- "$mentioning" snmalloc | sort)
else
  mapfile -t headers < <(cd "$src" && find snmalloc -name '*.h' | sort)
fi
((${#headers[@]} > 0)) || { echo "no headers under $src/snmalloc"; exit 1; }
failures=$(printf '%s\n' "${headers[@]}" |
  xargs -P "$(nproc)" -I{} bash -c 'compile_one "$@"' _ {} "${flags[@]}" | tee /dev/stderr | grep -c '^FAIL')
echo "${#headers[@]} headers compiled alone with ${flags[*]:-no flags}, $failures failed"
((failures == 0))
