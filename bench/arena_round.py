#!/usr/bin/env python3
"""The explicit arena round against its references, side by side (docs/BENCHMARKS.md, section 8).

Runs article_bench under libpoolscope.so, REPS times, the configurations interleaved, each pinned
to one CPU:
  track=0:  arena/threads:1 and call_floor/2 in one process (the round against two empty calls
            through the PLT);
  defaults: arena/threads:1 and malloc_free/5/threads:1 in one process (the tracked round against a
            tracked malloc(5)+free pair).
Prints each figure's per-run values and median (Google Benchmark's cpu_time, ns) and the ratios of
the medians.

Usage: bench/arena_round.py LIB ARTICLE_BENCH [--reps N] [--min-time S] [--cpu C]
ARTICLE_BENCH needs libcall_floor.so beside it or on its rpath (bazel-bin/bench/ has both)."""
import argparse
import json
import os
import statistics
import subprocess
import sys


def run(lib, bench, options, bench_filter, min_time, cpu):
    env = dict(os.environ, LD_PRELOAD=lib, POOLSCOPE_OPTIONS=options)
    out = subprocess.run(
        ["taskset", "-c", str(cpu), bench, "--benchmark_filter=" + bench_filter,
         "--benchmark_min_time=%g" % min_time, "--benchmark_format=json"],
        env=env, check=True, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True).stdout
    return {b["name"]: b["cpu_time"] for b in json.loads(out)["benchmarks"]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("lib")
    ap.add_argument("bench")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--min-time", type=float, default=0.5)
    ap.add_argument("--cpu", type=int, default=1)
    a = ap.parse_args()
    configs = [
        ("track=0", "track=0:quiet=1:report=none", "^(arena/threads:1|call_floor/2/threads:1)$"),
        ("defaults", "quiet=1:report=none", "^(arena/threads:1|malloc_free/5/threads:1)$"),
    ]
    figures = {}
    for _ in range(a.reps):
        for name, options, bench_filter in configs:
            for bench, ns in run(a.lib, a.bench, options, bench_filter, a.min_time, a.cpu).items():
                figures.setdefault((name, bench), []).append(ns)
    med = {}
    for (name, bench), values in sorted(figures.items()):
        med[(name, bench)] = statistics.median(values)
        print("%-9s %-26s median %6.2f ns  runs %s" % (name, bench, med[(name, bench)],
                                                       " ".join("%.2f" % v for v in values)))
    floor = med[("track=0", "call_floor/2/threads:1")]
    pair = med[("defaults", "malloc_free/5/threads:1")]
    print("track=0 round / 2 empty calls: %.2fx" % (med[("track=0", "arena/threads:1")] / floor))
    print("defaults round / tracked malloc(5)+free: %.2fx" % (med[("defaults", "arena/threads:1")] / pair))
    return 0


if __name__ == "__main__":
    sys.exit(main())
