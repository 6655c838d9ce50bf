#!/bin/bash
# Pass-through and pooled cost of libpoolscope.so, measured as ratios to the bare run (these
# machines are shared and noisy, so both sides run interleaved, pinned to one core, medians
# of REPS runs).
#
#   bench/run_passthrough.sh            builds with -c opt, then runs everything (a few minutes)
#   REPS=7 bench/run_passthrough.sh     more repetitions
#   SKIP_BUILD=1 LIB=... BENCH=... bench/run_passthrough.sh   use given binaries
#   SKIP_HYPERFINE=1 / SKIP_GBENCH=1    run one half only
#
# 1. bench/passthrough_bench (Google Benchmark, malloc+free of 5..8000 bytes), REPS rounds of
#    bare / pool=0 track=0 / pool=1 track=0, each pinned with taskset -c 0; prints the median time
#    per benchmark and configuration and the ratio to bare.
# 2. python3 (PYTHONMALLOC=malloc) on bench/py_bench.py, timed by hyperfine: REPS rounds of
#    bare / pool=0 track=0 (interleaved round by round), median wall time and ratio.
set -euo pipefail

cd "$(dirname "$0")/.."
REPS=${REPS:-5}
CPU=${CPU:-0}
MIN_TIME=${MIN_TIME:-0.3}
OUT=${OUT:-$(mktemp -d /tmp/poolscope_bench.XXXXXX)}
PASSTHROUGH_OPTIONS=${PASSTHROUGH_OPTIONS:-pool=0:track=0:quiet=1:report=none}
POOLED_OPTIONS=${POOLED_OPTIONS:-pool=1:track=0:quiet=1:report=none}

if [ -z "${SKIP_BUILD:-}" ]; then
  bazel build -c opt //interpose:libpoolscope.so //bench:passthrough_bench >&2
  BIN=$(bazel info -c opt bazel-bin 2>/dev/null)
  LIB=${LIB:-$BIN/interpose/libpoolscope.so}
  BENCH=${BENCH:-$BIN/bench/passthrough_bench}
fi
: "${LIB:?set LIB to libpoolscope.so}" "${BENCH:?set BENCH to passthrough_bench}"
LIB=$(readlink -f "$LIB")
echo "library:   $LIB" >&2
echo "benchmark: $BENCH" >&2
echo "output:    $OUT" >&2

run_config() {  # run_config NAME OPTIONS|- REP
  local name=$1 options=$2 rep=$3
  local -a env_args=(-u LD_PRELOAD -u POOLSCOPE_OPTIONS)
  [ "$options" = - ] || env_args=(LD_PRELOAD="$LIB" POOLSCOPE_OPTIONS="$options")
  taskset -c "$CPU" env "${env_args[@]}" "$BENCH" --benchmark_min_time="$MIN_TIME" \
    --benchmark_out="$OUT/gbench.$name.$rep.json" --benchmark_out_format=json >/dev/null
}

if [ -z "${SKIP_GBENCH:-}" ]; then
  for rep in $(seq 1 "$REPS"); do
    echo "round $rep/$REPS: bare, pool=0, pool=1" >&2
    run_config bare - "$rep"
    run_config pool0 "$PASSTHROUGH_OPTIONS" "$rep"
    run_config pool1 "$POOLED_OPTIONS" "$rep"
  done
  /usr/bin/python3 - "$OUT" "$REPS" "$PASSTHROUGH_OPTIONS" "$POOLED_OPTIONS" <<'PY'
import glob, json, os, statistics, sys
out, reps = sys.argv[1], int(sys.argv[2])
configs = [("bare", "bare"), ("pool0", sys.argv[3]), ("pool1", sys.argv[4])]
times = {}  # (config, benchmark) -> [ns]
order = []
for config, _ in configs:
    for f in sorted(glob.glob(os.path.join(out, "gbench.%s.*.json" % config))):
        for b in json.load(open(f))["benchmarks"]:
            if b.get("run_type", "iteration") != "iteration":
                continue
            ns = b["real_time"] * {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9}[b["time_unit"]]
            times.setdefault((config, b["name"]), []).append(ns)
            if b["name"] not in order:
                order.append(b["name"])
print()
print("Google Benchmark, median of %d interleaved runs, pinned to one core (ns per iteration)" % reps)
for config, options in configs[1:]:
    print("  %s = LD_PRELOAD=libpoolscope.so POOLSCOPE_OPTIONS=%s" % (config, options))
print("%-26s %10s %10s %10s %9s %9s" % ("benchmark", "bare", "pool0", "pool1", "pool0/bare", "pool1/bare"))
for name in order:
    med = {c: statistics.median(times[(c, name)]) if times.get((c, name)) else float("nan") for c, _ in configs}
    print("%-26s %10.2f %10.2f %10.2f %9.2fx %9.2fx" % (name, med["bare"], med["pool0"], med["pool1"],
                                                      med["pool0"] / med["bare"], med["pool1"] / med["bare"]))
PY
fi

if [ -z "${SKIP_HYPERFINE:-}" ]; then
  script=$(readlink -f bench/py_bench.py)
  for rep in $(seq 1 "$REPS"); do
    echo "hyperfine round $rep/$REPS" >&2
    taskset -c "$CPU" hyperfine -N --warmup 1 --runs 3 --export-json "$OUT/hyperfine.$rep.json" \
      -n bare "env -u LD_PRELOAD PYTHONMALLOC=malloc /usr/bin/python3 $script" \
      -n pool0 "env LD_PRELOAD=$LIB POOLSCOPE_OPTIONS=$PASSTHROUGH_OPTIONS PYTHONMALLOC=malloc /usr/bin/python3 $script" \
      >/dev/null
  done
  /usr/bin/python3 - "$OUT" "$REPS" "$PASSTHROUGH_OPTIONS" <<'PY'
import glob, json, os, statistics, sys
out, reps, options = sys.argv[1], int(sys.argv[2]), sys.argv[3]
runs = {}
for f in sorted(glob.glob(os.path.join(out, "hyperfine.*.json"))):
    for r in json.load(open(f))["results"]:
        runs.setdefault(r["command"], []).extend(r["times"])
print()
print("python3 bench/py_bench.py (PYTHONMALLOC=malloc), hyperfine, %d rounds x 3 runs interleaved, pinned" % reps)
print("  pool0 = POOLSCOPE_OPTIONS=%s" % options)
bare = statistics.median(runs["bare"])
for name in ("bare", "pool0"):
    m = statistics.median(runs[name])
    print("  %-6s median %.3f s  (min %.3f, max %.3f, n=%d)  ratio %.3fx"
          % (name, m, min(runs[name]), max(runs[name]), len(runs[name]), m / bare))
PY
fi
