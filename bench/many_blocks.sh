#!/bin/bash
# The many-live-blocks benchmark: bench/many_blocks (5,000,000 small allocations from four call
# sites, half freed as it goes, 2,500,000 live at exit, then exit(0)) under
#   bare;
#   track     poolscope pool=0:track=1:report=none (tracking alone: no report, so no exit scan);
#   defaults  poolscope's defaults with pool=0 and a report (tracking, the reachability scan, the report);
#   heaptrack heaptrack's raw recorder (its preload library writing to a file; skipped when absent).
# Every configuration runs once a round, in turn, pinned to one CPU (bench/interleave.py): medians of
# wall time and of the process's peak RSS, and their ratios to bare and to heaptrack. Then one run per
# view of tracking's own resident memory (the report's `internal`, poolscope's own mappings) per
# block live at exit (`logical.live_blocks`): with the scan off (`reachability=0`: the live table,
# the per-thread recent-block tables, the stack depot and the rest of poolscope's bookkeeping) and
# with the defaults (their peak includes the exit scan's arrays).
#
#   bench/many_blocks.sh                          builds with -c opt, then runs (about a minute)
#   SKIP_BUILD=1 LIB=/path/libpoolscope.so PROG=/path/many_blocks bench/many_blocks.sh
#   ROUNDS=9                                      rounds (default 5)
#   N=1000000                                     allocations (default 5000000; half stay live)
set -euo pipefail

cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-5}
N=${N:-5000000}
if [[ -z "${SKIP_BUILD:-}" ]]; then
  bazel build -c opt //interpose:libpoolscope.so //bench:many_blocks >&2
fi
LIB=$(realpath "${LIB:-bazel-bin/interpose/libpoolscope.so}")
PROG=$(realpath "${PROG:-bazel-bin/bench/many_blocks}")
HEAPTRACK=/usr/lib/heaptrack/libheaptrack_preload.so
INTERLEAVE=$(realpath bench/interleave.py)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/many_blocks.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"

configs=(--config "track LD_PRELOAD=$LIB POOLSCOPE_OPTIONS=pool=0:track=1:report=none:quiet=1"
         --config "defaults LD_PRELOAD=$LIB POOLSCOPE_OPTIONS=pool=0:quiet=1:report=$WORK/defaults.json")
reference=()
if [[ -f "$HEAPTRACK" ]]; then
  configs+=(--config "heaptrack LD_PRELOAD=$HEAPTRACK DUMP_HEAPTRACK_OUTPUT=$WORK/heaptrack.raw")
  reference=(--reference heaptrack)
else
  echo "many_blocks.sh: $HEAPTRACK not found: heaptrack's recorder is left out (no ratios to it)"
fi

echo "== $PROG $N, $ROUNDS rounds"
"$INTERLEAVE" --rounds "$ROUNDS" --ratios "${reference[@]}" "${configs[@]}" -- "$PROG" "$N"

echo "== tracking's own resident memory per block live at exit"
LD_PRELOAD=$LIB POOLSCOPE_OPTIONS="pool=0:reachability=0:quiet=1:report=$WORK/noscan.json" "$PROG" "$N"
python3 - "$WORK/noscan.json" "$WORK/defaults.json" <<'PY'
import json, sys
for path, what in ((sys.argv[1], "pool=0 reachability=0 (tracking)"), (sys.argv[2], "pool=0, defaults (scan, report)")):
    r = json.load(open(path))
    live, internal = r["logical"]["live_blocks"], r["internal"]
    print("%-34s live %9d   at the report %6.1f B/block   peak %6.1f B/block   (%.1f / %.1f MiB)" % (
        what, live, internal["resident_bytes"] / live, internal["peak_resident_bytes"] / live,
        internal["resident_bytes"] / 2**20, internal["peak_resident_bytes"] / 2**20))
r = json.load(open(sys.argv[2]))
print("the defaults' last exit: scan_ms %s, report_ms %s" % (
    (r.get("reachability") or {}).get("scan_ms"), r["process"].get("report_ms")))
PY
