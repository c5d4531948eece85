#!/usr/bin/env python3
"""Run the benchmarks of src/test/perf under several allocators.

Each benchmark program uses plain malloc/free and is run under every
allocator by LD_PRELOAD (glibc is the program without a preload).  Runs are
interleaved, each round running every allocator in an order of its own, so
drift of a shared machine hits every allocator alike, and the tables report
medians of K runs: throughput from the program's RESULT line, peak RSS from
the child's rusage.

Modes:
  compare   ours (and ours-profile when built) vs glibc, jemalloc, mimalloc,
            tcmalloc: median ops/sec and peak RSS, each with its ratio to
            the best allocator of the workload.
  overhead  the price of sampling heap profiling, each profiler against the
            same allocator without it: ours-profile vs ours, jemalloc with
            MALLOC_CONF=prof:true vs plain, gperftools' full tcmalloc with
            TCMALLOC_SAMPLE_PARAMETER=524288 vs without.  All three sample
            a mean of once per 512 KiB allocated.
  sampling  ours-profile in each sampling mode at its default rate (bytes
            512 KiB, count and sizeclass 8192 allocations) and with guarded
            sampling (guard=100) against ours, and guard=100 against the
            same profiling without it.
  checks    the checks build (libsnmallocshim-checks.so) against ours.
  profile-compare
            the overhead mode's profilers, each run both pinned to one CPU
            (taskset -c 1: no line moves between cores) and unpinned, in
            the same interleaved rounds; jemalloc's profiler must be seen
            to sample (opt.prof true) or it is skipped.

Example:
  scripts/bench/bench.py --build /work/main/build --runs 5 --mode both
"""

import argparse
import dataclasses
import json
import os
import platform
import random
import re
import statistics
import subprocess
import sys
import tempfile

SYSTEM_LIB = "/usr/lib/x86_64-linux-gnu"
# random-replace: refill-heavy churn; fork-exec: process start-up;
# xthread-mix and thread-churn: cross-thread and thread-count work (issue 9).
WORKLOADS = [
    "churn",
    "random-replace",
    "producer-consumer",
    "larson",
    "large-churn",
    "realloc-growth",
    "fork-exec",
    "xthread-mix",
    "thread-churn",
    # every thread allocates, another frees (xmalloc-style)
    "producer-freer",
    # a live heap at a new peak all the time (the peak profile's worst case)
    "peak-growth",
    # a full heap frees a fifth here and there and allocates it again
    "sparse-reuse",
    # a full heap freed whole in random order
    "free-all",
]
MULTI_THREADED = {"producer-consumer", "larson", "xthread-mix", "thread-churn", "producer-freer"}
SAMPLE_BYTES = "524288"
RESULT_LINE = re.compile(r"^RESULT (.*)$", re.MULTILINE)


@dataclasses.dataclass
class Allocator:
    name: str
    preload: str  # empty: no preload (glibc)
    env: dict
    missing: str = ""  # why it cannot run, if it cannot
    cpus: str = ""  # taskset's CPU list when pinned


@dataclasses.dataclass
class Run:
    ok: bool
    ops_per_sec: float = 0.0
    ops_per_cpu_sec: float = 0.0
    peak_rss_kib: int = 0
    error: str = ""


def library(path, name, env=None):
    missing = "" if os.path.exists(path) else f"{path} not found"
    return Allocator(name, path, env or {}, missing)


# jemalloc's profiler, active, sampling once per 2^19 bytes on average.
JEMALLOC_PROF = f"prof:true,prof_active:true,lg_prof_sample:{int(SAMPLE_BYTES).bit_length() - 1}"


def named_shim(text):
    """--also's NAME=SHIM; the shim's path is made absolute, since runs start in a scratch directory."""
    name, sep, path = text.partition("=")
    if not sep or not name or not path:
        raise argparse.ArgumentTypeError(f"expected NAME=SHIM, got {text!r}")
    return name, os.path.abspath(path)


def jemalloc_profiling(path):
    """jemalloc with its profiler on, or why this build cannot do it: the
    probe's statistics must say the profiler is on (a build without prof
    ignores the option with a warning and would run unprofiled)."""
    allocator = library(path, "jemalloc+prof", {"MALLOC_CONF": JEMALLOC_PROF})
    if allocator.missing:
        return allocator
    probe = subprocess.run(
        ["/bin/true"],
        env={**os.environ, "LD_PRELOAD": path, "MALLOC_CONF": JEMALLOC_PROF + ",stats_print:true"},
        capture_output=True,
        text=True,
    )
    if "opt.prof: true" not in probe.stderr:
        allocator.missing = f"this libjemalloc does not profile ({JEMALLOC_PROF}: opt.prof is not true)"
    return allocator


def pinned(allocator, cpus):
    return dataclasses.replace(allocator, name=f"{allocator.name}@cpu{cpus}", cpus=cpus)


def allocators_for(mode, build):
    ours = library(os.path.join(build, "libsnmallocshim.so"), "ours")
    ours_profile = library(
        os.path.join(build, "libsnmallocshim-profile.so"),
        "ours-profile",
        {"SNMALLOC_PROFILE": f"rate={SAMPLE_BYTES}"},
    )
    jemalloc_path = os.path.join(SYSTEM_LIB, "libjemalloc.so.2")
    tcmalloc_full = os.path.join(SYSTEM_LIB, "libtcmalloc.so.4")
    if mode == "sampling":
        profile = ours_profile.preload
        return [
            ours,
            ours_profile,
            library(profile, "ours-count", {"SNMALLOC_PROFILE": "mode=count"}),
            library(profile, "ours-sizeclass", {"SNMALLOC_PROFILE": "mode=sizeclass"}),
            library(profile, "ours-guard100", {"SNMALLOC_PROFILE": f"rate={SAMPLE_BYTES},guard=100"}),
            library(profile, "ours-sizeclass-guard100", {"SNMALLOC_PROFILE": "mode=sizeclass,guard=100"}),
        ]
    if mode == "checks":
        return [ours, library(os.path.join(build, "libsnmallocshim-checks.so"), "ours-checks")]
    if mode == "compare":
        return [
            ours,
            ours_profile,
            Allocator("glibc", "", {}),
            library(jemalloc_path, "jemalloc"),
            library(os.path.join(SYSTEM_LIB, "libmimalloc.so.2"), "mimalloc"),
            library(os.path.join(SYSTEM_LIB, "libtcmalloc_minimal.so.4"), "tcmalloc"),
        ]
    profilers = [
        ours,
        ours_profile,
        library(jemalloc_path, "jemalloc"),
        jemalloc_profiling(jemalloc_path),
        library(tcmalloc_full, "tcmalloc-full"),
        library(tcmalloc_full, "tcmalloc-full+sample", {"TCMALLOC_SAMPLE_PARAMETER": SAMPLE_BYTES}),
    ]
    if mode == "profile-compare":
        return profilers + [pinned(a, PIN_CPUS) for a in profilers]
    return profilers


# (baseline, with profiling or checks) pairs of the overhead and checks modes.
OVERHEAD_PAIRS = [
    ("ours", "ours-profile"),
    ("ours", "ours-checks"),
    ("jemalloc", "jemalloc+prof"),
    ("tcmalloc-full", "tcmalloc-full+sample"),
]

# The profile-compare mode: the overhead pairs, unpinned and pinned.
PIN_CPUS = "1"
PROFILE_COMPARE_PAIRS = [
    pair for p in OVERHEAD_PAIRS if "ours-checks" not in p for pair in (p, tuple(f"{n}@cpu{PIN_CPUS}" for n in p))
]

# The pairs of the sampling mode.
SAMPLING_PAIRS = [
    ("ours", "ours-profile"),
    ("ours", "ours-count"),
    ("ours", "ours-sizeclass"),
    ("ours-profile", "ours-guard100"),
    ("ours-sizeclass", "ours-sizeclass-guard100"),
]


def run_once(program, args, allocator, workdir):
    """Runs one benchmark; throughput from its RESULT line, peak RSS from
    GNU time.  (Python's own rusage of the child would count the forked
    interpreter's pages, which the kernel keeps in maxrss across exec.)
    `env` applies the preload to the benchmark only, not to time."""
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    env.update(allocator.env)
    preload = [f"LD_PRELOAD={allocator.preload}"] if allocator.preload else []
    if allocator.cpus:
        preload += ["taskset", "-c", allocator.cpus]
    with tempfile.NamedTemporaryFile("w+", dir=workdir, suffix=".rss") as rss:
        process = subprocess.run(
            ["/usr/bin/time", "-o", rss.name, "-f", "%M", "env", *preload, program, *args],
            env=env,
            cwd=workdir,
            capture_output=True,
            text=True,
        )
        exit_code, stdout, stderr = process.returncode, process.stdout, process.stderr
        time_report = rss.read()
    killed = re.search(r"terminated by signal (\d+)", time_report)
    if killed:
        exit_code = -int(killed.group(1))
    match = RESULT_LINE.search(stdout)
    if exit_code != 0 or not match:
        how = f"exit status {exit_code}"
        if exit_code < 0:
            how = f"killed by signal {-exit_code}"
        detail = (stderr.strip() or stdout.strip())[-400:]
        return Run(False, error=f"{how}: {detail}" if detail else how)
    fields = dict(item.split("=", 1) for item in match.group(1).split())
    return Run(True, float(fields["ops_per_sec"]), float(fields["ops_per_cpu_sec"]), int(time_report.split()[-1]))


def measure(workloads, allocators, runs, perf_dir, threads, extra_args):
    """results[workload][allocator] = list of Run, K of them, one a round."""
    results = {w: {a.name: [] for a in allocators} for w in workloads}
    with tempfile.TemporaryDirectory(prefix="snmalloc-bench-") as workdir:
        for k in range(runs):
            for workload in workloads:
                program = os.path.join(perf_dir, f"perf-{workload}")
                args = list(extra_args)
                if workload in MULTI_THREADED:
                    args += ["--threads", str(threads)]
                # A fixed order favoured some places in it by about 5%
                # on unchanged workloads; each round draws its own.
                order = list(allocators)
                random.Random(k).shuffle(order)
                for allocator in order:
                    run = run_once(program, args, allocator, workdir)
                    results[workload][allocator.name].append(run)
                    status = f"{run.ops_per_sec:,.0f} ops/s {run.peak_rss_kib} KiB" if run.ok else "FAILED"
                    print(f"[{k + 1}/{runs}] {workload:18} {allocator.name:21} {status}", file=sys.stderr)
    return results


# What the tables show: (heading, Run field, higher is better, format).
METRICS = {
    "wall": ("Median ops/sec (wall clock)", "ops_per_sec", True, lambda v: rate(v)),
    "cpu": ("Median ops per CPU-second (user + system, all threads)", "ops_per_cpu_sec", True, lambda v: rate(v)),
    "rss": ("Median peak RSS (MiB)", "peak_rss_kib", False, lambda v: f"{v / 1024:.1f}"),
}


def median_of(runs, field):
    """Median over the successful runs, or None if every run failed."""
    values = [getattr(r, field) for r in runs if r.ok]
    return statistics.median(values) if values else None


def spread_of(runs, field):
    """(max - min) / median over the successful runs."""
    values = [getattr(r, field) for r in runs if r.ok]
    return (max(values) - min(values)) / statistics.median(values) if values else None


def rate(ops_per_sec):
    """1234567 -> '1.23M': one format for workloads a thousandfold apart."""
    for scale, suffix in ((1e6, "M"), (1e3, "k")):
        if ops_per_sec >= scale:
            return f"{ops_per_sec / scale:.3g}{suffix}"
    return f"{ops_per_sec:.3g}"


def markdown(header, rows):
    return "\n".join(
        ["| " + " | ".join(header) + " |", "| --- | " + " | ".join("---:" for _ in header[1:]) + " |"]
        + ["| " + " | ".join(row) + " |" for row in rows]
    )


def compare_table(results, names, metric):
    """One table: workloads down, allocators across, each cell the median
    and, in brackets, its ratio to the best allocator of the workload."""
    heading, field, higher_is_better, show = METRICS[metric]
    rows = []
    for workload, by_allocator in results.items():
        values = {n: median_of(by_allocator[n], field) for n in names}
        known = [v for v in values.values() if v is not None]
        best = (max if higher_is_better else min)(known) if known else None
        rows.append([workload] + [
            "failed" if v is None else f"{show(v)} ({v / best:.2f})" for v in (values[n] for n in names)
        ])
    ratio = "best" if higher_is_better else "smallest"
    return f"{heading}, ratio to the {ratio} in brackets:\n\n" + markdown(["workload", *names], rows)


def spread_table(results, names):
    rows = []
    for workload, by_allocator in results.items():
        row = [workload]
        for n in names:
            wall, cpu = (spread_of(by_allocator[n], f) for f in ("ops_per_sec", "ops_per_cpu_sec"))
            row.append("-" if wall is None else f"{100 * wall:.0f}% / {100 * cpu:.0f}%")
        rows.append(row)
    return (
        "Run-to-run spread, (max - min) / median, of ops/sec (wall) / ops per CPU-second:\n\n"
        + markdown(["workload", *names], rows)
    )


def overhead_table(results, available, pairs=OVERHEAD_PAIRS):
    """One table per profiler: its throughput and peak RSS next to the same
    allocator's without profiling, as medians and ratios."""
    tables = []
    for base, profiled in pairs:
        if base not in available or profiled not in available:
            continue
        rows = []
        for workload, by_allocator in results.items():
            row = [workload]
            for field in ("ops_per_sec", "ops_per_cpu_sec", "peak_rss_kib"):
                b, p = median_of(by_allocator[base], field), median_of(by_allocator[profiled], field)
                if b is None or p is None:
                    row += ["failed"] * 3
                else:
                    show = METRICS["rss"][3] if field == "peak_rss_kib" else rate
                    row += [show(b), show(p), f"{p / b:.3f}"]
            # Round by round (each round runs both), which a drift of the
            # machine's load between rounds moves less than the medians.
            ratios = [
                p.ops_per_cpu_sec / b.ops_per_cpu_sec
                for b, p in zip(by_allocator[base], by_allocator[profiled])
                if b.ok and p.ok
            ]
            row.append(
                f"{statistics.median(ratios):.3f} [{min(ratios):.2f}..{max(ratios):.2f}]" if ratios else "failed")
            rows.append(row)
        header = ["workload"] + [
            f"{what} {column}"
            for what in ("ops/s", "ops/CPU-s", "RSS MiB")
            for column in (base, profiled, "ratio")
        ] + ["ops/CPU-s ratio per round, median [range]"]
        tables.append(f"{profiled} against {base} (medians; ratio = {profiled} / {base}):\n\n" + markdown(header, rows))
    return "\n\n".join(tables)


def failures(results):
    lines = []
    for workload, by_allocator in results.items():
        for name, runs in by_allocator.items():
            for i, run in enumerate(runs):
                if not run.ok:
                    lines.append(f"- {workload} under {name}, run {i + 1}: {run.error}")
    return lines


def cpu_model():
    with open("/proc/cpuinfo") as cpuinfo:
        for line in cpuinfo:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor()


def run_mode(mode, options):
    allocators = allocators_for(mode, options.build)
    # Another build of ours (an older commit, a reference allocator) beside
    # the rest, and ours against it round by round.
    also = [library(path, name) for name, path in options.also]
    allocators += also
    pairs = [(a.name, "ours") for a in also]
    if options.pinned and mode != "profile-compare":
        allocators += [pinned(a, PIN_CPUS) for a in allocators if not a.cpus]
        pairs += [tuple(f"{n}@cpu{PIN_CPUS}" for n in p) for p in pairs]
    usable = [a for a in allocators if not a.missing]
    for a in allocators:
        if a.missing:
            print(f"note: {a.name} skipped: {a.missing}")
    extra = ["--smoke"] if options.smoke else []
    results = measure(options.workloads, usable, options.runs, options.perf_dir, options.threads, extra)
    names = [a.name for a in usable]
    print()
    print(f"### {mode}: {options.runs} runs per cell, {options.threads} threads for "
          f"{', '.join(sorted(MULTI_THREADED))}")
    print()
    if mode == "compare":
        print("\n\n".join([*(compare_table(results, names, m) for m in METRICS), spread_table(results, names)]))
        if pairs:
            print("\n" + overhead_table(results, set(names), pairs))
    else:
        pairs = {"sampling": SAMPLING_PAIRS, "profile-compare": PROFILE_COMPARE_PAIRS}.get(mode, OVERHEAD_PAIRS)
        print(overhead_table(results, set(names), pairs))
        if mode == "profile-compare":
            print("\n" + spread_table(results, names))
    failed = failures(results)
    if failed:
        print("\nFailed runs:\n")
        print("\n".join(failed))
    print()
    return {w: {n: [dataclasses.asdict(r) for r in runs] for n, runs in by.items()} for w, by in results.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default="/work/main/build", help="build tree holding libsnmallocshim*.so")
    parser.add_argument("--perf-dir", help="folder of the perf-* programs (default BUILD/src/test/perf)")
    parser.add_argument("--runs", type=int, default=5, help="runs per allocator and workload (K)")
    parser.add_argument("--threads", type=int, default=2, help="threads of the multi-threaded workloads")
    parser.add_argument("--mode", choices=["compare", "overhead", "both", "sampling", "checks", "profile-compare"], default="compare")
    parser.add_argument("--workloads", nargs="+", default=WORKLOADS, choices=WORKLOADS)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, to test this script")
    parser.add_argument("--also", action="append", default=[], metavar="NAME=SHIM",
                        type=named_shim,
                        help="one more allocator to preload (repeatable); ours is also compared with it round by round")
    parser.add_argument("--pinned", action="store_true",
                        help="run every allocator also pinned to one CPU (taskset), in the same rounds")
    parser.add_argument("--json", help="also write every run's figures to this file")
    options = parser.parse_args()
    options.build = os.path.abspath(options.build)
    options.perf_dir = os.path.abspath(options.perf_dir or os.path.join(options.build, "src/test/perf"))
    for workload in options.workloads:
        if not os.access(os.path.join(options.perf_dir, f"perf-{workload}"), os.X_OK):
            sys.exit(f"perf-{workload} not found in {options.perf_dir}: build the perf targets or pass --perf-dir")

    print(f"Machine: {os.cpu_count()} CPUs, {cpu_model()}; {platform.platform()}")
    print(f"Command: {' '.join(sys.argv)}")
    modes = ["compare", "overhead"] if options.mode == "both" else [options.mode]
    everything = {mode: run_mode(mode, options) for mode in modes}
    if options.json:
        with open(options.json, "w") as out:
            json.dump(everything, out, indent=1)


if __name__ == "__main__":
    main()
