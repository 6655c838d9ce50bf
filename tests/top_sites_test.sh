#!/bin/bash
# The report's sites ledger lists the busiest call sites, most allocations first: many_sites has forty
# sites, site_N making N + 1 allocations, called in a scrambled order; the report (which lists at most
# 32 sites) must hold site_39 down to site_8 in that order, each with its count, with pooling on and
# off, and the program's output must be as bare.
# Args: LIB CHECKER MANY_SITES
set -euo pipefail
lib=$(readlink -f "$1"); checker=$(readlink -f "$2"); prog=$(readlink -f "$3")
work=${TEST_TMPDIR:-$(mktemp -d)}/top_sites
mkdir -p "$work"
# The same with every allocation from another site than the one before (`interleaved`).
for mode in sequential interleaved; do
bare=$("$prog" $mode)
for pool in 1 0; do
  out=$(LD_PRELOAD="$lib" POOLSCOPE_OPTIONS="pool=$pool:quiet=1:report=$work/r$pool.json" "$prog" $mode)
  [ "$out" = "$bare" ] || { echo "FAIL: $mode: output differs with pool=$pool"; exit 1; }
  /usr/bin/python3 "$checker" "$work/r$pool.json"
  /usr/bin/python3 - "$work/r$pool.json" "$pool" "$mode" <<'PY'
import json, re, sys
r = json.load(open(sys.argv[1])); pool = int(sys.argv[2]); mode = sys.argv[3]
listed = []
for s in r["sites"]:
    names = [f.get("function", "") for f in s["stack"]]
    site = next((int(m.group(1)) for n in names for m in [re.match(r"(?:site|once)_(\d+)$", n)] if m), None)
    if site is not None:
        listed.append((site, s["logical_allocs"]))
n = len(r["sites"])
assert n == 32, "%s pool=%d: %d sites listed, expected 32 (forty sites and main's)" % (mode, pool, n)
# The sites ledger keeps the 32 busiest: site_39 (40 allocations) down to site_8 (9); main's few
# allocations (stdout's buffer) rank below them.
want = [(k, k + 1) for k in range(39, 7, -1)]
assert listed == want, "%s pool=%d: sites %r, expected %r" % (mode, pool, listed, want)
print("%s pool=%d ok" % (mode, pool))
PY
done
done
echo PASS
