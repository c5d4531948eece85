# Cross builds for 64-bit Arm Linux with Debian's cross compiler
# (g++-aarch64-linux-gnu), the tests run under qemu-user:
#
#   cmake -S . -B build/aarch64 \
#     -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/aarch64-linux-gnu.cmake
#
# Libraries for the target come from Debian multiarch (zlib1g-dev:arm64 in
# /usr/lib/aarch64-linux-gnu, which the compiler's library architecture
# already searches); header-only packages of the host (Catch2) and host
# programs (go, python3) are found as usual.  scripts/setup.sh --aarch64
# installs all of it.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

set(SNMALLOC_CROSS_TRIPLE aarch64-linux-gnu)
set(CMAKE_C_COMPILER ${SNMALLOC_CROSS_TRIPLE}-gcc)
set(CMAKE_CXX_COMPILER ${SNMALLOC_CROSS_TRIPLE}-g++)

# ctest runs each test executable under qemu-user, through a script that
# gives it Debian's arm64 libraries and a bounded address space, and hands
# LD_PRELOAD to the guest alone (see the script).
set(CMAKE_CROSSCOMPILING_EMULATOR ${CMAKE_CURRENT_LIST_DIR}/qemu-aarch64-run.sh)
