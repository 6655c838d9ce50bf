#!/bin/bash
# Tracking's own resident memory (the report's internal.peak_resident_bytes, poolscope's own
# mappings) is at most 48 bytes per block live at exit (docs/BENCHMARKS.md), with pool=0 and the exit scan off
# (reachability=0: its arrays are the exit's, not tracking's): bench/many_blocks at 5,000,000
# allocations (2,500,000 live, the issue's workload) and at 3,300,000 (1,650,000 live, just past the
# point where every stripe of the live table has doubled its array, the least full the table gets in
# that range, where the arrays it outgrew weigh the most per block).
# Args: LIB CHECKER MANY_BLOCKS
set -euo pipefail
lib=$(readlink -f "$1"); checker=$(readlink -f "$2"); prog=$(readlink -f "$3")
work=${TEST_TMPDIR:-$(mktemp -d)}/tracking_memory
mkdir -p "$work"
for n in 5000000 3300000; do
  LD_PRELOAD="$lib" POOLSCOPE_OPTIONS="pool=0:reachability=0:quiet=1:report=$work/r$n.json" "$prog" "$n"
  /usr/bin/python3 "$checker" "$work/r$n.json"
  /usr/bin/python3 - "$work/r$n.json" "$n" <<'PY'
import json, sys
r, n = json.load(open(sys.argv[1])), int(sys.argv[2])
live, peak = r["logical"]["live_blocks"], r["internal"]["peak_resident_bytes"]
assert r["tracked"] is True, "not every block was tracked"
assert n // 2 <= live <= n // 2 + 1000, "%d live blocks at exit for %d allocations" % (live, n)
per = peak / live
print("%d allocations: %d live, tracking's own peak resident %d bytes, %.1f per live block" % (n, live, peak, per))
assert per <= 48, "%.1f bytes of tracking's own memory per live block (at most 48)" % per
PY
done
echo PASS
