#!/bin/bash
# A stack id is given again only for the stack it was made for. tests/programs/stack_switch.c makes
# 64 new stacks in a row on one thread (a run on which the per-thread walk memo does not pay, so the
# next 1,024 captures go without it), 1,024 allocations from one other site, then the 64th stack again
# and keeps that block. The report must put the kept block on f77/g77, not on the site seen last.
# Args: LIB CHECKER STACK_SWITCH
set -euo pipefail
lib=$(readlink -f "$1"); checker=$(readlink -f "$2"); prog=$(readlink -f "$3")
work=${TEST_TMPDIR:-$(mktemp -d)}/stack_switch
mkdir -p "$work"
bare=$("$prog")
for pool in 1 0; do
  out=$(LD_PRELOAD="$lib" POOLSCOPE_OPTIONS="pool=$pool:quiet=1:report=$work/r$pool.json" "$prog")
  [ "$out" = "$bare" ] || { echo "FAIL: output differs with pool=$pool"; exit 1; }
  /usr/bin/python3 "$checker" "$work/r$pool.json"
  /usr/bin/python3 - "$work/r$pool.json" "$pool" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); pool = int(sys.argv[2])
kept = [g for g in r["leaks"] if g["bytes"] == 1077]
assert len(kept) == 1 and kept[0]["blocks"] == 1, "pool=%d: groups of the kept block: %r" % (pool, kept)
names = [f["function"] for f in kept[0]["stack"]]
assert names[:2] == ["f77", "g77"], "pool=%d: the kept block's stack: %r" % (pool, names)
assert not [g for g in r["leaks"] if any(f["function"] == "filler" for f in g["stack"])], r["leaks"]
PY
done
echo "PASS: the kept block is on its own stack (pool=1 and pool=0)"
