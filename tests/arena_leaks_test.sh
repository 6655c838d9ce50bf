#!/bin/bash
# An explicit arena never closed: its blocks are live logical blocks at exit, so the report's leaks
# name who allocated them, with exact blocks and bytes, pooled or not; arenas that were closed leave
# nothing behind; the ledgers' live bytes include the arena's blocks, and the report reconciles.
# Also without tracking (track=0): the output and exit status never change.
# Args: LIB CHECKER ARENA_LEAKS
set -euo pipefail
lib=$(readlink -f "$1"); checker=$(readlink -f "$2"); prog=$(readlink -f "$3")
work=${TEST_TMPDIR:-$(mktemp -d)}/arena_leaks
mkdir -p "$work"
bare=$("$prog")
for opts in "pool=1" "pool=0" "pool=1:pools=0" "pool=1:track=0"; do
  out=$(LD_PRELOAD="$lib" POOLSCOPE_OPTIONS="$opts:quiet=1:report=$work/r.json" "$prog") ||
    { echo "FAIL ($opts): exit $?: $out"; exit 1; }
  [ "$out" = "$bare" ] || { echo "FAIL ($opts): output '$out' != '$bare'"; exit 1; }
  /usr/bin/python3 "$checker" "$work/r.json"
  /usr/bin/python3 - "$work/r.json" "$opts" <<'PY'
import json, sys
r, opts = json.load(open(sys.argv[1])), sys.argv[2]
leaks = r["leaks"]
def first(g):
    return g["stack"][0]["function"] if g["stack"] else ""
if "track=0" in opts:
    assert leaks == [], leaks
    print("ok", opts, "(untracked)")
    sys.exit(0)
assert r["leak_groups_omitted"] == 0, r["leak_groups_omitted"]
by_fn = {}
for g in leaks:
    by_fn.setdefault(first(g), []).append((g["blocks"], g["bytes"]))
assert by_fn.get("leak_pooled_in_arena") == [(3, 48)], by_fn
assert by_fn.get("leak_large_in_arena") == [(1, 500)], by_fn
for g in leaks:
    names = [f["function"] for f in g["stack"]]
    assert "rounds_of_closed_arenas" not in names, ("a closed arena's block is reported live", g)
# Every live logical block is in some group, and the bytes add up.
assert sum(g["blocks"] for g in leaks) == r["logical"]["live_blocks"], (leaks, r["logical"])
assert sum(g["bytes"] for g in leaks) == r["logical"]["live_bytes"], (leaks, r["logical"])
# The dual ledger per site: the 16-byte blocks were pool hits when pooling was on.
sites = {}  # by the site's first function, summed over its call sites
for s in r["sites"]:
    if not s["stack"]:
        continue
    t = sites.setdefault(first(s), {"logical_allocs": 0, "pool_hits": 0, "real_allocs": 0})
    for k in t:
        t[k] += s[k]
s = sites["leak_pooled_in_arena"]
assert s["logical_allocs"] == 3, s
assert s["pool_hits"] == (3 if opts.startswith("pool=1") else 0), s
assert sites["leak_large_in_arena"]["pool_hits"] == 0, sites["leak_large_in_arena"]
closed = sites["rounds_of_closed_arenas"]
assert closed["logical_allocs"] == 400, closed
assert closed["real_allocs"] >= 200, closed  # the 700-byte blocks take the regular path
print("ok", opts, by_fn)
PY
done
