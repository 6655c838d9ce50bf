#!/bin/bash
# One command for every benchmark of docs/BENCHMARKS.md: builds (bazel -c opt) the preload library,
# bench/article_bench and bench/malloc_loop, then runs bench/run_all.py, which prints one markdown
# table (machine, date, medians, ratios, targets met or missed) and writes it to OUTPUT.md (and the
# raw figures to OUTPUT.json). Exit status 0 when every step ran, 1 when one failed, 2 bad usage.
#
#   bench/run_all.sh [--quick] OUTPUT.md [run_all.py options]
#
#   --quick          a smoke run: 3 short rounds, small workloads, memcheck once (under 2 minutes)
#   --sizes=5,20     only these malloc sizes          --reps=N         interleaved rounds (default 5)
#   --steps=gbench,process,callgrind                  --scale=F        whole-process workload size
#   --min-time=S     Google Benchmark min time        --keep=DIR       keep the raw results in DIR
#   SKIP_BUILD=1 LIB=... BENCH=... LOOP=... ARENA_LOOP=...  use given binaries (the sh_test does)
#
# The full run takes about 10-15 minutes on a 2-core machine; see docs/BENCHMARKS.md.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; }
if [ $# -lt 1 ]; then
  usage >&2
  exit 2
fi
args=()
out=""
for a in "$@"; do
  case "$a" in
    -h | --help) usage; exit 0 ;;
    -*) args+=("$a") ;;
    *)
      [ -z "$out" ] || { echo "run_all.sh: one output file only ($out, $a)" >&2; exit 2; }
      out=$a
      ;;
  esac
done
[ -n "$out" ] || { echo "run_all.sh: name the output file (e.g. bench/results.md)" >&2; exit 2; }

if [ -z "${SKIP_BUILD:-}" ]; then
  (cd "$root" && bazel build -c opt //interpose:libpoolscope.so //bench:article_bench //bench:malloc_loop \
    //bench:arena_loop) >&2
  bin=$(cd "$root" && bazel info -c opt bazel-bin 2>/dev/null)
  LIB=${LIB:-$bin/interpose/libpoolscope.so}
  BENCH=${BENCH:-$bin/bench/article_bench}
  LOOP=${LOOP:-$bin/bench/malloc_loop}
  ARENA_LOOP=${ARENA_LOOP:-$bin/bench/arena_loop}
fi
: "${LIB:?set LIB to libpoolscope.so}" "${BENCH:?set BENCH to article_bench}" "${LOOP:?set LOOP to malloc_loop}"
: "${ARENA_LOOP:?set ARENA_LOOP to arena_loop}"

exec /usr/bin/python3 "$here/run_all.py" --lib "$LIB" --bench "$BENCH" --loop "$LOOP" \
  --arena-loop "$ARENA_LOOP" --root "$root" \
  --command "bench/run_all.sh $*" "${args[@]}" "$out"
