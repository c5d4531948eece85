#!/usr/bin/env bash
# Installs what building, testing and the demo need on Debian 12, and only
# what is missing: on a machine that has everything it runs no apt-get.
#
#   bash scripts/setup.sh           compilers, libraries, go/pprof, graphviz
#   bash scripts/setup.sh --bench   also the allocators and tools the
#                                   benchmarks compare against
#   bash scripts/setup.sh --aarch64 also the aarch64 cross compiler, qemu-user
#                                   and arm64 zlib and libunwind (multiarch)
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
# The aarch64 build (cmake/toolchains/aarch64-linux-gnu.cmake) and its tests
# under qemu-user.  The cross C library is only a recommendation of the
# compiler, so it is named.  The programs run on Debian's arm64 libraries
# of multiarch (libstdc++6:arm64 and, through zlib, libc6:arm64), which
# also give the build zlib and libunwind and the profiler the libz.so.1 it
# loads at its first dump (cmake/toolchains/qemu-aarch64-run.sh).
aarch64_packages=(g++-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user
                  libstdc++6:arm64 zlib1g-dev:arm64 libunwind-dev:arm64)

for arg in "$@"; do
  case "$arg" in
    --bench) packages+=("${bench_packages[@]}") ;;
    --aarch64) packages+=("${aarch64_packages[@]}") ;;
    -h|--help) sed -n '2,9p' "${BASH_SOURCE[0]}"; exit 0 ;;
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

native_arch=$(dpkg --print-architecture)

# is_installed NAME[:ARCH]: NAME installed for ARCH, or for this machine's
# architecture (or all) when none is given; dpkg-query lists every
# architecture's instance of a multiarch package.
is_installed() {
  local name=${1%%:*} arch=${native_arch}
  [[ $1 == *:* ]] && arch=${1#*:}
  dpkg-query -W -f='${db:Status-Status} ${Architecture}\n' "$name" 2>/dev/null |
    grep -qx -e "installed $arch" -e "installed all"
}

missing=()
for package in "${packages[@]}"; do
  is_installed "$package" || missing+=("$package")
done

if ((${#missing[@]})); then
  echo "setup.sh: installing ${missing[*]}"
  # Packages of another architecture (NAME:arm64) need it added to dpkg
  # before the package lists are fetched.
  for package in "${missing[@]}"; do
    [[ $package == *:* ]] || continue
    arch=${package#*:}
    if [[ $arch != "$native_arch" ]] &&
       ! dpkg --print-foreign-architectures | grep -qx "$arch"; then
      as_root dpkg --add-architecture "$arch"
    fi
  done
  as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q
  # --no-remove: a multiarch library upgrades its native twin to the same
  # version, and must never take a package away instead.
  as_root env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -q --no-install-recommends --no-remove "${missing[@]}"
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
