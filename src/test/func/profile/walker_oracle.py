#!/usr/bin/env python3
"""libunwind as the oracle of the built-in stack walker.

Generates programs of random call shapes from a seed, builds each with
every compiler given at -O0, -O2 and -O3, with and without frame pointers,
and runs it: at the innermost frame of each chain of shapes the program
calls walker_oracle_probe (walker_oracle_probe.cc), which walks the stack
with the built-in walker (libgcc's where that falls back) and with
libunwind and fails on any difference.  Each chain runs twice, so that
the built-in walker's rule cache is tried cold and warm.

The shapes: plain frames, large frames (4 KiB to 64 KiB, stack probes and
all), alloca, stacks realigned for an over-aligned local, tail calls,
a leaf interrupted by a fault whose SIGSEGV handler goes on (signal frame
over a frameless leaf), raise() of a signal whose handler goes on (signal
frame over libc), recursion, qsort's callback (libc's frames, built without
frame pointers), a C++ destructor run by an exception in flight, a catch
block, and every call between the program and a shared library of its own.

Where there is no built-in walker (aarch64) the probe's walk is libgcc's,
so the test holds libgcc and libunwind to each other; cross-built, the
programs run under --emulator, and a compiler may carry its own flags
("clang++ --target=aarch64-linux-gnu").

The seed is printed; `--seed S --programs 1` replays a failing program.

usage: walker_oracle.py --probe libwalker-oracle-probe.so --compiler g++
       [--compiler clang++] [--programs N] [--seed S] [--keep DIR]
       [--emulator PROGRAM]
"""
import argparse
import os
import random
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

SHAPES = [
    "plain", "large", "alloca", "realign", "tail", "leaf_fault", "raise",
    "recursion", "qsort", "unwinding_dtor", "catch",
]

PRELUDE = r"""
#include <alloca.h>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <sys/mman.h>
#include <unistd.h>
#if defined(__clang__)
#  define NOINLINE __attribute__((noinline))
#else
#  define NOINLINE __attribute__((noinline, noclone))
#endif
#define KEEP(v) asm volatile("" : : "r"(v) : "memory")
extern "C" int walker_oracle_probe(const char* shape);
// The chain's continuation for a signal handler, one level at a time.
extern "C" int (*oracle_pending)(int);
extern "C" int oracle_pending_arg;
extern "C" int oracle_pending_result;
extern "C" int oracle_failures;
NOINLINE int oracle_leaf_read(volatile int* p);
"""

MAIN_SUPPORT = r"""
extern "C" int (*oracle_pending)(int) = nullptr;
extern "C" int oracle_pending_arg = 0;
extern "C" int oracle_pending_result = 0;
extern "C" int oracle_failures = 0;
extern "C" void walker_oracle_summary();

// A leaf: no calls, no frame at -O2.
NOINLINE int oracle_leaf_read(volatile int* p)
{
  return *p;
}

static void oracle_go_on(int, siginfo_t* info, void*)
{
  int (*next)(int) = oracle_pending;
  oracle_pending = nullptr;
  if (next != nullptr)
    oracle_pending_result = next(oracle_pending_arg);
  if (info->si_signo == SIGSEGV)
  {
    uintptr_t page = uintptr_t(info->si_addr) & ~uintptr_t(4095);
    mprotect(reinterpret_cast<void*>(page), 4096, PROT_READ | PROT_WRITE);
  }
}

static void oracle_handlers()
{
  struct sigaction sa = {};
  sa.sa_sigaction = oracle_go_on;
  sa.sa_flags = SA_SIGINFO | SA_NODEFER;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGSEGV, &sa, nullptr);
  sigaction(SIGUSR1, &sa, nullptr);
}
"""


def body(shape, name, nxt, rng):
    """One function of a chain: `int name(int x)` calling `nxt`."""
    call = f"{nxt}(x + 1)"
    if shape == "plain":
        return f"NOINLINE int {name}(int x)\n{{\n  int r = {call};\n  KEEP(r);\n  return r + 1;\n}}\n"
    if shape == "large":
        size = rng.choice([4096, 5000, 12288, 40000, 65536])
        return (f"NOINLINE int {name}(int x)\n{{\n  volatile char big[{size}];\n"
                f"  big[0] = char(x);\n  big[{size - 1}] = char(x);\n  int r = {call};\n"
                f"  KEEP(r);\n  return r + big[x % {size}];\n}}\n")
    if shape == "alloca":
        size = rng.choice([16, 200, 3000, 9000])
        return (f"NOINLINE int {name}(int x)\n{{\n  char* p = static_cast<char*>(alloca({size} + (x & 15)));\n"
                f"  p[0] = char(x);\n  KEEP(p);\n  int r = {call};\n  KEEP(r);\n  return r + p[0];\n}}\n")
    if shape == "realign":
        align = rng.choice([32, 64, 128, 4096])
        return (f"NOINLINE int {name}(int x)\n{{\n  alignas({align}) volatile char buf[64];\n"
                f"  buf[0] = char(x);\n  KEEP(&buf[0]);\n  int r = {call};\n  KEEP(r);\n  return r + buf[0];\n}}\n")
    if shape == "tail":
        return f"NOINLINE int {name}(int x)\n{{\n  return {call};\n}}\n"
    if shape == "leaf_fault":
        return (f"NOINLINE int {name}(int x)\n{{\n"
                f"  void* page = mmap(nullptr, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);\n"
                f"  oracle_pending = {nxt};\n  oracle_pending_arg = x + 1;\n"
                f"  int seen = oracle_leaf_read(static_cast<volatile int*>(page));\n"
                f"  munmap(page, 4096);\n  KEEP(seen);\n  return oracle_pending_result + seen;\n}}\n")
    if shape == "raise":
        return (f"NOINLINE int {name}(int x)\n{{\n  oracle_pending = {nxt};\n"
                f"  oracle_pending_arg = x + 1;\n  raise(SIGUSR1);\n  int r = oracle_pending_result;\n"
                f"  KEEP(r);\n  return r + 1;\n}}\n")
    if shape == "recursion":
        depth = rng.randint(1, 24)
        return (f"NOINLINE int {name}_r(int x, int k)\n{{\n  if (k == 0)\n  {{\n    int r = {call};\n"
                f"    KEEP(r);\n    return r;\n  }}\n  int r = {name}_r(x, k - 1);\n  KEEP(r);\n  return r + 1;\n}}\n"
                f"NOINLINE int {name}(int x)\n{{\n  int r = {name}_r(x, {depth});\n  KEEP(r);\n  return r;\n}}\n")
    if shape == "qsort":
        return (f"static int {name}_result;\n"
                f"static int {name}_compare(const void* a, const void* b)\n{{\n"
                f"  if ({name}_result == 0)\n    {name}_result = {nxt}(*static_cast<const int*>(a) + 1);\n"
                f"  return *static_cast<const int*>(a) - *static_cast<const int*>(b);\n}}\n"
                f"NOINLINE int {name}(int x)\n{{\n  int v[2] = {{x + 1, x}};\n  {name}_result = 0;\n"
                f"  qsort(v, 2, sizeof(int), {name}_compare);\n  KEEP(v[0]);\n  return {name}_result;\n}}\n")
    if shape == "unwinding_dtor":
        return (f"struct {name}_guard\n{{\n  int x;\n  int* out;\n"
                f"  NOINLINE ~{name}_guard()\n  {{\n    *out = {nxt}(x);\n  }}\n}};\n"
                f"NOINLINE void {name}_throw(int x)\n{{\n  if (x >= 0)\n    throw x;\n}}\n"
                f"NOINLINE int {name}(int x)\n{{\n  int r = 0;\n  try\n  {{\n"
                f"    {name}_guard g{{x + 1, &r}};\n    {name}_throw(x);\n  }}\n"
                f"  catch (int)\n  {{\n  }}\n  KEEP(r);\n  return r;\n}}\n")
    if shape == "catch":
        return (f"NOINLINE void {name}_throw(int x)\n{{\n  if (x >= 0)\n    throw x;\n}}\n"
                f"NOINLINE int {name}(int x)\n{{\n  try\n  {{\n    {name}_throw(x + 1);\n  }}\n"
                f"  catch (int v)\n  {{\n    int r = {nxt}(v);\n    KEEP(r);\n    return r + 1;\n  }}\n  return 0;\n}}\n")
    raise ValueError(shape)


def generate(seed):
    """(main.cc, lib.cc, number of chains) of program `seed`."""
    rng = random.Random(seed)
    units = {"main": [PRELUDE, MAIN_SUPPORT], "lib": [PRELUDE]}
    declarations = []
    chains = rng.randint(3, 6)
    entries = []
    for c in range(chains):
        length = rng.randint(2, 8)
        shapes = [rng.choice(SHAPES) for _ in range(length)]
        places = [rng.choice(["main", "lib"]) for _ in range(length)]
        if len(set(places)) == 1:
            places[rng.randrange(length)] = "lib" if places[0] == "main" else "main"
        names = [f"s{seed}_c{c}_{i}_{shape}" for i, shape in enumerate(shapes)]
        innermost = f"s{seed}_c{c}_innermost"
        label = f"seed {seed} chain {c}: " + " > ".join(
            f"{shape}@{place}" for shape, place in zip(shapes, places))
        units[rng.choice(["main", "lib"])].append(
            f'NOINLINE int {innermost}(int x)\n{{\n  oracle_failures += walker_oracle_probe("{label}");\n'
            f"  KEEP(x);\n  return x;\n}}\n")
        declarations.append(f"int {innermost}(int x);")
        for i in range(length):
            nxt = names[i + 1] if i + 1 < length else innermost
            units[places[i]].append(body(shapes[i], names[i], nxt, rng))
            declarations.append(f"int {names[i]}(int x);")
        entries.append(names[0])
    decl = "\n".join(declarations) + "\n"
    main = "".join(units["main"][:2]) + decl + "".join(units["main"][2:])
    main += "int main()\n{\n  oracle_handlers();\n  int total = 0;\n"
    main += "  for (int round = 0; round < 2; round++)\n  {\n"
    for e in entries:
        main += f"    total += {e}(round);\n"
    main += "  }\n  KEEP(total);\n  walker_oracle_summary();\n  return oracle_failures != 0;\n}\n"
    lib = units["lib"][0] + decl + "".join(units["lib"][1:])
    return main, lib, chains


def build_and_run(work, compiler, opt, fp, probe, main_src, lib_src, emulator):
    flags = [opt, "-g", "-fexceptions", "-Wno-attributes",
             "-fno-omit-frame-pointer" if fp else "-fomit-frame-pointer"]
    compiler = shlex.split(compiler)
    tag = f"{os.path.basename(compiler[0])}{opt}{'-fp' if fp else '-nofp'}"
    d = os.path.join(work, tag)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "main.cc"), "w") as f:
        f.write(main_src)
    with open(os.path.join(d, "lib.cc"), "w") as f:
        f.write(lib_src)
    lib = os.path.join(d, "libshapes.so")
    prog = os.path.join(d, "shapes")
    probe_dir = os.path.dirname(probe)
    for cmd in (
        [*compiler, *flags, "-fPIC", "-shared", "-o", lib, os.path.join(d, "lib.cc")],
        [*compiler, *flags, "-rdynamic", "-o", prog, os.path.join(d, "main.cc"), lib, probe,
         f"-Wl,-rpath,{d}:{probe_dir}"],
    ):
        built = subprocess.run(cmd, capture_output=True, text=True)
        if built.returncode != 0:
            return tag, None, f"build failed: {' '.join(cmd)}\n{built.stderr}"
    ran = subprocess.run([*emulator, prog], capture_output=True, text=True, timeout=120)
    summary = ran.stdout.strip().splitlines()[-1:] or [""]
    fields = summary[0].split()
    counts = dict(zip(fields[0::2], map(int, fields[1::2]))) if len(fields) == 8 else None
    if ran.returncode != 0 or counts is None:
        return tag, counts, f"exit {ran.returncode}\n{ran.stdout}{ran.stderr}"
    return tag, counts, None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--probe", required=True)
    ap.add_argument("--compiler", action="append", default=[])
    ap.add_argument("--programs", type=int, default=2)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--keep", default=None)
    ap.add_argument("--emulator", default=None)
    args = ap.parse_args()
    seed = args.seed if args.seed is not None else int(time.time() * 1000) % 1000000007
    compilers = [c for c in args.compiler if shutil.which(shlex.split(c)[0])]
    for c in args.compiler:
        if c not in compilers:
            print(f"walker_oracle: {c} not installed, not used")
    print(f"walker_oracle: seeds {seed} .. {seed + args.programs - 1} "
          f"(replay one: --seed S --programs 1), compilers {', '.join(compilers)}")
    work = args.keep or tempfile.mkdtemp(prefix="walker-oracle-")
    totals = {"stacks": 0, "frames": 0, "fell_back": 0, "mismatches": 0}
    builds = failures = shapes = 0
    try:
        for k in range(args.programs):
            s = seed + k
            main_src, lib_src, chains = generate(s)
            shapes += chains
            for compiler in compilers:
                for opt in ("-O0", "-O2", "-O3"):
                    for fp in (True, False):
                        tag, counts, error = build_and_run(
                            os.path.join(work, str(s)), compiler, opt, fp, args.probe, main_src, lib_src,
                            [args.emulator] if args.emulator else [])
                        builds += 1
                        if counts:
                            for key in totals:
                                totals[key] += counts[key]
                        if error:
                            failures += 1
                            print(f"FAIL: seed {s} {tag}: {error}")
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    print(f"walker_oracle: {args.programs} programs ({shapes} chains of shapes) x {builds // max(args.programs, 1)} "
          f"builds: {totals['stacks']} stacks, {totals['frames']} frames compared, "
          f"{totals['fell_back']} walked by libgcc (the built-in walker fell back, or there is none), "
          f"{totals['mismatches']} mismatches, {failures} failed builds or runs")
    return 1 if failures or not compilers or totals["frames"] == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
