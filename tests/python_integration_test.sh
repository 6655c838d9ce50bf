#!/bin/bash
# python3 (PYTHONMALLOC=malloc: every object through malloc) bare, pool=0 and pool=1: same stdout,
# stderr and exit status (3); one report per run, complete and balanced.
# Args: LIB CHECKER WORKLOAD.py
source "$(dirname "$0")/integration_lib.sh"
integration_init "$1" "$2"
workload=$(abspath "$3")
run_three python /dev/null PYTHONMALLOC=malloc PYTHONHASHSEED=0 -- /usr/bin/python3 "$workload"
[ "$(cat "$WORK/python/bare/status")" = 3 ] || fail "the bare python3 run exited $(cat "$WORK/python/bare/status"), expected 3"
standard_checks python 'python3*'
# python3 runs one thread: the exit scan counts none left running, its own helper threads not among
# them, also when 3.6M blocks are live at exit (the scan's arrays then take a helper thread a while to
# fault in).
mkdir -p "$WORK/python/kept"
PYTHONMALLOC=malloc LD_PRELOAD="$LIB" POOLSCOPE_OPTIONS="quiet=1:report=$WORK/python/kept/r.json" \
  "$PY" -c 'import os; keep = [(i, str(i)) for i in range(1200000)]; os._exit(0)' || fail "python/kept: exit status $?"
"$PY" - "$WORK/python/kept/r.json" <<'PY' || fail "python/kept: the scan's threads"
import json, sys
r = json.load(open(sys.argv[1]))
reach = r["reachability"]
assert reach["scanned"], reach
assert r["pool"]["pooled_live_blocks"] >= 3600000, r["pool"]
assert reach["threads_stopped"] == 0 and reach["threads_not_stopped"] == 0, reach
PY
echo PASS
