#!/bin/bash
# What the exit reachability scan costs: python3 (PYTHONMALLOC=malloc) keeping 1.2M (int, str) tuples
# live at exit (a heap of about 180 MB scanned, 3.6M pools), python3 running a few lines of json,
# and sqlite3 filling an in-memory table, each run N times with reachability=1 and reachability=0,
# every setting once a round, in turn. Prints the medians of the report's reachability.scan_ms,
# heap_bytes_scanned and process.report_ms, of python3's exit (from os._exit to the parent's wait
# returning: the scan, the report and the process's end) and of the whole run's wall time. A library
# built before the scan existed may be given (its reports have no scan: its figures are its exit's).
#
#   bench/reachability_cost.sh              builds with -c opt, then runs (a few minutes)
#   SKIP_BUILD=1 LIB=/path/libpoolscope.so bench/reachability_cost.sh
#   LIB2=/path/other/libpoolscope.so        a second library, measured in the same rounds
#   N=5                                     runs of each setting (default 5)
# Needs python3 and sqlite3.
set -euo pipefail

cd "$(dirname "$0")/.."
N=${N:-5}
if [[ -z "${SKIP_BUILD:-}" ]]; then
  bazel build -c opt //interpose:libpoolscope.so
fi
LIB=$(realpath "${LIB:-bazel-bin/interpose/libpoolscope.so}")
LIB2=${LIB2:+$(realpath "$LIB2")}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/reachability_cost.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
# The interpreter itself, not a wrapper script (pyenv's shims start other processes).
PY=$(python3 -c 'import sys; print(sys.executable)')

cat >"$WORK/big.py" <<'SRC'
import os, time
keep = [(i, str(i)) for i in range(1200000)]
os.write(int(os.environ["EXIT_FD"]), repr(time.monotonic()).encode())
os._exit(0)
SRC
cat >"$WORK/small.py" <<'SRC'
import json, os, time
doc = json.dumps({"rows": [{"id": i, "name": "row %d" % i} for i in range(2000)]})
assert len(json.loads(doc)["rows"]) == 2000
os.write(int(os.environ["EXIT_FD"]), repr(time.monotonic()).encode())
os._exit(0)
SRC
{
  echo "CREATE TABLE t(a INTEGER PRIMARY KEY, b TEXT);"
  echo "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 200000)"
  echo "  INSERT INTO t SELECT x, printf('row %d', x) FROM c;"
  echo "SELECT count(*), sum(length(b)) FROM t;"
} >"$WORK/fill.sql"

"$PY" - "$WORK" "$N" "$PY" "$LIB" ${LIB2:+"$LIB2"} <<'RUN'
import json, os, statistics, subprocess, sys, time
work, n, py, libs = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4:]
programs = {
    "python3": ([py, os.path.join(work, "big.py")], {"PYTHONMALLOC": "malloc"}, None),
    "python3 json": ([py, os.path.join(work, "small.py")], {"PYTHONMALLOC": "malloc"}, None),
    "sqlite3": (["sqlite3", ":memory:"], {}, os.path.join(work, "fill.sql")),
}
med = statistics.median
for name, (argv, extra, stdin_path) in programs.items():
    results = {(lib, reach): [] for lib in libs for reach in (1, 0)}
    for _ in range(n):
        for lib, reach in results:
            report = os.path.join(work, "r.json")
            rfd, wfd = os.pipe()
            env = dict(os.environ, LD_PRELOAD=lib, EXIT_FD=str(wfd), **extra,
                       POOLSCOPE_OPTIONS="reachability=%d:report=%s" % (reach, report))
            stdin = open(stdin_path) if stdin_path else subprocess.DEVNULL
            t0 = time.monotonic()
            subprocess.run(argv, env=env, stdin=stdin, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, check=True, pass_fds=(wfd,))
            t1 = time.monotonic()
            os.close(wfd)
            said = os.read(rfd, 64)
            os.close(rfd)
            exit_ms = (t1 - float(said)) * 1000 if said else 0
            j = json.load(open(report))
            r = j.get("reachability", {})
            results[(lib, reach)].append((t1 - t0, r.get("scan_ms", 0), r.get("heap_bytes_scanned", 0),
                                          j["process"].get("report_ms", 0), exit_ms))
            os.unlink(report)
    for lib in libs:
        on, off = results[(lib, 1)], results[(lib, 0)]
        col = lambda rs, i: med([x[i] for x in rs])
        print("%s%s (%d runs each): scan_ms %d, heap_bytes_scanned %d, report_ms %d and %d, "
              "wall %.2f s with the scan, %.2f s without" %
              (name, " " + lib if len(libs) > 1 else "", n, col(on, 1), col(on, 2), col(on, 3), col(off, 3),
               col(on, 0), col(off, 0)))
        if name.startswith("python3"):
            print("  exit %d ms with the scan, %d ms without" % (col(on, 4), col(off, 4)))
RUN
