#!/usr/bin/env bash
# Installs what building, testing and the demo need on Debian 12, and only
# what is missing: on a machine that has everything it runs no apt-get.
#
#   bash scripts/setup.sh           compilers, libraries, go/pprof, graphviz
#   bash scripts/setup.sh --bench   also the allocators and tools the
#                                   benchmarks compare against
set -euo pipefail

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# bc: src/test/func/fastpath/check_fastpath.sh computes per-call counts.
# prometheus (with promtool) and curl: the HTTP endpoint's test
# (src/test/func/http/http.sh) scrapes it with a real Prometheus server of
# its own on a free port (where systemd runs, the package also starts
# Debian's prometheus service on :9090; the test does not use it).
packages=(cmake g++ clang make catch2 zlib1g-dev
          libunwind-dev
          golang-go graphviz valgrind python3 bc prometheus curl)
bench_packages=(libjemalloc-dev libmimalloc-dev libgoogle-perftools-dev)

for arg in "$@"; do
  case "$arg" in
    --bench) packages+=("${bench_packages[@]}") ;;
    -h|--help) sed -n '2,7p' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) echo "setup.sh: unknown argument '$arg' (try --help)" >&2; exit 2 ;;
  esac
done

# The Rust bindings are tested only when they exist; any cargo will do, so a
# machine with a rustup toolchain keeps it.
if [[ -f "$repo_root/rust/Cargo.toml" ]] && ! command -v cargo >/dev/null; then
  packages+=(cargo)
fi

# Runs a command as root: directly when we are root, else through sudo.
as_root() {
  if [[ $EUID -eq 0 ]]; then
    "$@"
  elif command -v sudo >/dev/null; then
    sudo "$@"
  else
    echo "setup.sh: need root to run '$*'; run as root or install sudo" >&2
    exit 1
  fi
}

missing=()
for package in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$package" 2>/dev/null || true)
  [[ "$status" == installed ]] || missing+=("$package")
done

if ((${#missing[@]})); then
  echo "setup.sh: installing ${missing[*]}"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q
  as_root env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -q --no-install-recommends "${missing[@]}"
else
  echo "setup.sh: all ${#packages[@]} packages present"
fi

# Debian's golang-go puts go at /usr/lib/go/bin/go with a link in /usr/bin;
# where that link is missing or /usr/bin is not searched, add one that is.
if ! command -v go >/dev/null; then
  if [[ -x /usr/lib/go/bin/go ]]; then
    as_root ln -sf /usr/lib/go/bin/go /usr/local/bin/go
  fi
  command -v go >/dev/null || {
    echo "setup.sh: 'go' not found after installing golang-go" >&2
    exit 1
  }
fi
