#!/bin/sh
# Runs an aarch64 program under qemu-user: the emulator of
# aarch64-linux-gnu.cmake, so ctest runs test executables through it.
#
# The program runs on Debian's arm64 libraries of multiarch (the loader,
# libc, libstdc++, libz: scripts/setup.sh --aarch64), all of one version,
# and not with qemu -L /usr/aarch64-linux-gnu: that root holds the cross
# compiler's older C library without zlib, and the loader found there with
# the multiarch libc.so.6 it falls back to hung in pthread_create.
#
# -R: the guest gets 32 GiB of address space, reserved up front.  qemu 7.2
# keeps flags for every page a guest maps, even inaccessible ones, so the
# allocator's 16 TiB arena reservation took qemu 14 GB of memory in under a
# minute and never finished; refused that, the arena falls back to 24 GiB
# (backend/arena.h), and a test process costs qemu about 200 MB.
#
# qemu-aarch64 is a host program: an LD_PRELOAD of aarch64 libraries in the
# environment would make the host's loader try them on qemu itself (and
# print an error).  It is passed to the guest alone (-E), and LD_PRELOAD is
# taken away from qemu.  SNMALLOC_TEST_EMULATOR names this script to the
# guest, so a test that executes a program of its own (itself again,
# support/death.h) goes through it too: nothing else runs aarch64 programs
# here (no binfmt_misc handler, as on CI).
set -eu
SNMALLOC_TEST_EMULATOR=$(readlink -f "$0")
export SNMALLOC_TEST_EMULATOR
if [ -n "${LD_PRELOAD:-}" ]; then
  preload=$LD_PRELOAD
  unset LD_PRELOAD
  exec qemu-aarch64 -R 32G -E "LD_PRELOAD=$preload" "$@"
fi
exec qemu-aarch64 -R 32G "$@"
