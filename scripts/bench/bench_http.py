#!/usr/bin/env python3
"""The cost of being scraped: the small-object benchmarks of src/test/perf
under the profiling shim, without the HTTP endpoint and with it while a
scraper fetches /metrics and /debug/pprof/heap (what a Prometheus server and
a continuous profiler would fetch) every PERIOD seconds.

Runs are interleaved (A, B, A, B, ...) so drift hits both alike; the table
gives medians of K runs and the ratio B/A of ops per second (wall) and of
ops per CPU-second (user + system of every thread of the process, the
server's included).  A real scrape interval (10 s) costs too little to
see in runs of seconds, so measure at a short PERIOD and scale: the cost
at 10 s is the cost at PERIOD times PERIOD / 10.

Example:
  scripts/bench/bench_http.py --build build/on --runs 5 --period 0.5
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
import threading
import time
import urllib.request

WORKLOADS = ["churn", "random-replace", "producer-consumer", "larson"]
RESULT = re.compile(r"^RESULT (.*)$", re.MULTILINE)
PORT = re.compile(rb"http://127\.0\.0\.1:(\d+)/")


def scrape_until(port, period, stop, counts):
    base = f"http://127.0.0.1:{port}"
    while not stop.wait(period):
        for path in ("/metrics", "/debug/pprof/heap"):
            try:
                with urllib.request.urlopen(base + path, timeout=30) as r:
                    r.read()
                counts[path] = counts.get(path, 0) + 1
            except OSError:
                counts["failed"] = counts.get("failed", 0) + 1


def run_once(program, shim, endpoint, period, extra):
    env = dict(os.environ, LD_PRELOAD=shim)
    env["SNMALLOC_PROFILE"] = "rate=524288" + (",http=:0" if endpoint else "")
    p = subprocess.Popen([program, *extra], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    stop, counts, scraper = threading.Event(), {}, None
    if endpoint:
        line = p.stderr.readline()
        match = PORT.search(line)
        if not match:
            p.kill()
            sys.exit(f"no port announced: {line!r}")
        scraper = threading.Thread(target=scrape_until, args=(int(match.group(1)), period, stop, counts))
        scraper.start()
    out, err = p.communicate()
    stop.set()
    if scraper:
        scraper.join()
    match = RESULT.search(out.decode())
    if p.returncode != 0 or not match:
        sys.exit(f"{program} failed: {err.decode()[-400:]}")
    fields = dict(item.split("=", 1) for item in match.group(1).split())
    return float(fields["ops_per_sec"]), float(fields["ops_per_cpu_sec"]), counts


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default="build/on")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--period", type=float, default=0.5, help="seconds between scrapes")
    parser.add_argument("--ops", help="--ops for every benchmark (default: theirs)")
    parser.add_argument("--workloads", nargs="*", default=WORKLOADS)
    args = parser.parse_args()
    shim = os.path.abspath(os.path.join(args.build, "libsnmallocshim-profile.so"))
    extra = ["--ops", args.ops] if args.ops else []
    print(f"| workload | ops/s without | ops/s scraped every {args.period:g} s | wall ratio | "
          f"CPU ratio | scrapes | cost at 10 s (CPU) |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for w in args.workloads:
        program = os.path.join(args.build, "src/test/perf", f"perf-{w}")
        a, b, scrapes = [], [], 0
        for k in range(args.runs):
            a.append(run_once(program, shim, False, args.period, extra))
            b.append(run_once(program, shim, True, args.period, extra))
            scrapes += sum(v for key, v in b[-1][2].items() if key != "failed")
            print(f"[{k + 1}/{args.runs}] {w}: {a[-1][0]:,.0f} vs {b[-1][0]:,.0f} ops/s, {b[-1][2]}",
                  file=sys.stderr)
        wall = statistics.median(x[0] for x in b) / statistics.median(x[0] for x in a)
        cpu = statistics.median(x[1] for x in b) / statistics.median(x[1] for x in a)
        at_10s = (1 - cpu) * args.period / 10
        print(f"| {w} | {statistics.median(x[0] for x in a):,.0f} | {statistics.median(x[0] for x in b):,.0f} | "
              f"{wall:.3f} | {cpu:.3f} | {scrapes / args.runs:.1f} per run | {100 * at_10s:.3f}% |")


if __name__ == "__main__":
    main()
