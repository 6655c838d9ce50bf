#!/bin/bash
# What the exit reachability scan costs: python3 (PYTHONMALLOC=malloc) keeping 1.2M (int, str) tuples
# live at exit (a heap of about 180 MB scanned), and sqlite3 filling an in-memory table, each run N
# times with reachability=1 and reachability=0, the two interleaved. Prints the medians of the
# report's reachability.scan_ms and heap_bytes_scanned, and of the whole run's wall time; the
# difference of the wall medians is what the scan adds to the exit.
#
#   bench/reachability_cost.sh              builds with -c opt, then runs (a few minutes)
#   SKIP_BUILD=1 LIB=/path/libpoolscope.so bench/reachability_cost.sh
#   N=5                                     runs of each setting (default 5)
# Needs python3 and sqlite3.
set -euo pipefail

cd "$(dirname "$0")/.."
N=${N:-5}
if [[ -z "${SKIP_BUILD:-}" ]]; then
  bazel build -c opt //interpose:libpoolscope.so
fi
LIB=$(realpath "${LIB:-bazel-bin/interpose/libpoolscope.so}")
WORK=$(mktemp -d "${TMPDIR:-/tmp}/reachability_cost.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
# The interpreter itself, not a wrapper script (pyenv's shims start other processes).
PY=$(python3 -c 'import sys; print(sys.executable)')

cat >"$WORK/big.py" <<'SRC'
import os
keep = [(i, str(i)) for i in range(1200000)]
os._exit(0)
SRC
{
  echo "CREATE TABLE t(a INTEGER PRIMARY KEY, b TEXT);"
  echo "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 200000)"
  echo "  INSERT INTO t SELECT x, printf('row %d', x) FROM c;"
  echo "SELECT count(*), sum(length(b)) FROM t;"
} >"$WORK/fill.sql"

"$PY" - "$LIB" "$WORK" "$N" "$PY" <<'RUN'
import json, os, statistics, subprocess, sys, time
lib, work, n, py = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
programs = {
    "python3": ([py, os.path.join(work, "big.py")], {"PYTHONMALLOC": "malloc"}, None),
    "sqlite3": (["sqlite3", ":memory:"], {}, os.path.join(work, "fill.sql")),
}
for name, (argv, extra, stdin_path) in programs.items():
    results = {0: [], 1: []}
    for _ in range(n):
        for reach in (1, 0):
            report = os.path.join(work, "r.json")
            env = dict(os.environ, LD_PRELOAD=lib, **extra,
                       POOLSCOPE_OPTIONS="reachability=%d:report=%s" % (reach, report))
            stdin = open(stdin_path) if stdin_path else subprocess.DEVNULL
            t0 = time.monotonic()
            subprocess.run(argv, env=env, stdin=stdin, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, check=True)
            wall = time.monotonic() - t0
            r = json.load(open(report))["reachability"]
            results[reach].append((wall, r.get("scan_ms", 0), r.get("heap_bytes_scanned", 0)))
            os.unlink(report)
    med = lambda xs: statistics.median(xs)
    w1, w0 = med([x[0] for x in results[1]]), med([x[0] for x in results[0]])
    print("%s (%d runs each): scan_ms %d, heap_bytes_scanned %d, wall %.2f s with the scan, "
          "%.2f s without" % (name, n, med([x[1] for x in results[1]]), med([x[2] for x in results[1]]), w1, w0))
RUN
