#!/usr/bin/env bash
# Builds the consumer project against this source tree both ways a user
# would: installed and found with find_package, and with add_subdirectory.
#   consumer.sh <source dir> <profile ON|OFF> [stack walker: auto|builtin|libunwind|libgcc]
set -euo pipefail
src=$1
profile=$2
unwinder=${3:-auto}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
here=$(cd "$(dirname "$0")" && pwd)
quiet() { "$@" >"$work/log" 2>&1 || { cat "$work/log"; return 1; }; }

quiet cmake -S "$src" -B "$work/lib" -DSNMALLOC_BUILD_TESTING=OFF -DSNMALLOC_PROFILE="$profile" \
  -DSNMALLOC_PROFILE_UNWINDER="$unwinder" -DCMAKE_INSTALL_PREFIX="$work/prefix"
quiet cmake --build "$work/lib" -j2
quiet cmake --install "$work/lib"
quiet cmake -S "$here/project" -B "$work/found" -DCMAKE_PREFIX_PATH="$work/prefix"
quiet cmake --build "$work/found"
"$work/found/consumer"

quiet cmake -S "$here/project" -B "$work/sub" -DSNMALLOC_SOURCE_DIR="$src" -DSNMALLOC_PROFILE="$profile" \
  -DSNMALLOC_PROFILE_UNWINDER="$unwinder"
quiet cmake --build "$work/sub" -j2
"$work/sub/consumer"
