#!/bin/bash
# Pooling must actually happen: a loop of a million malloc(5)+free with pooling on makes at most 1% of
# its logical allocations as real ones (issue: "real allocations at most 1% of logical ones"), every
# one of them a pool hit; with pool=0 every logical allocation is a real one and nothing is pooled.
# Args: LIB CHECKER MALLOC_LOOP
set -euo pipefail
lib=$(readlink -f "$1"); checker=$(readlink -f "$2"); loop=$(readlink -f "$3")
work=${TEST_TMPDIR:-$(mktemp -d)}/pooling_effect
mkdir -p "$work"
for pool in 1 0; do
  LD_PRELOAD="$lib" POOLSCOPE_OPTIONS="pool=$pool:quiet=1:report=$work/r$pool.json" "$loop" 1000000 5
  /usr/bin/python3 "$checker" "$work/r$pool.json"
done
/usr/bin/python3 - "$work/r1.json" "$work/r0.json" <<'PY'
import json, sys
on, off = (json.load(open(f)) for f in sys.argv[1:3])
n = 1000000
lo, ro, po = on["logical"], on["real"], on["pool"]
assert lo["by_api"]["malloc"] >= n and lo["by_api"]["free"] >= n, lo["by_api"]
assert ro["allocs"] <= 0.01 * lo["allocs"], "pooling on: %d real allocations for %d logical" % (ro["allocs"], lo["allocs"])
assert po["hits"] >= n, "pooling on: only %d pool hits for %d malloc(5)" % (po["hits"], n)
lf, rf, pf = off["logical"], off["real"], off["pool"]
assert rf["allocs"] == lf["allocs"] >= n, (rf["allocs"], lf["allocs"])
assert pf["hits"] == 0 and pf["misses"]["disabled"] >= n, pf
print("pooling on: %d logical, %d real allocations, %d hits; off: %d real" % (lo["allocs"], ro["allocs"], po["hits"], rf["allocs"]))
PY
echo PASS
