#!/bin/bash
# An explicit arena never closed: its blocks are live logical blocks at exit, so the report's leaks
# name who allocated them, with exact blocks and bytes, pooled or not (the allocating call's frame, then
# the open's stack); a block allocated in the function that opened its arena shows that frame once; arenas that were closed leave
# nothing behind; the ledgers' live bytes include the arena's blocks, and the report reconciles.
# Also with pools=0 and without tracking (track=0); in every run the output, stderr and exit status are
# the bare run's.
# Args: LIB CHECKER ARENA_LEAKS
source "$(dirname "$0")/integration_lib.sh"
integration_init "$1" "$2"
prog=$(abspath "$3")
run_three arena_leaks /dev/null -- "$prog"
grep -q '^arena_leaks closed=' "$WORK/arena_leaks/bare/stdout" || fail "the bare run failed: $(cat "$WORK/arena_leaks/bare/stderr")"
standard_checks arena_leaks arena_leaks
run_with_options arena_leaks pools0 "pool=1:pools=0:quiet=1:report=@REPORT@" /dev/null -- "$prog"
run_with_options arena_leaks untracked "pool=1:track=0:quiet=1:report=@REPORT@" /dev/null -- "$prog"
for mode in pools0 untracked; do
  same_as_bare arena_leaks "$mode"
  reports_ok arena_leaks "$mode" 1
done
for mode in pool1 pool0 pools0 untracked; do
  "$PY" - "$WORK"/arena_leaks/$mode/reports/r.*.json "$mode" <<'PY' || fail "arena_leaks/$mode: the leaks (above)"
import json, sys
r, mode = json.load(open(sys.argv[1])), sys.argv[2]
leaks = r["leaks"]
def first(g):
    return g["stack"][0]["function"] if g["stack"] else ""
if mode == "untracked":
    assert leaks == [], leaks
    print("ok", mode, "(untracked)")
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
    assert "rounds_of_small_arenas" not in names, ("a closed arena's block is reported live", g)
    if names and names[0] in ("leak_pooled_in_arena", "leak_large_in_arena"):
        # The allocating call's frame, then the stack of the open (in main): whole, and nothing of
        # poolscope's or the client library's between them.
        assert names[1] == "main", ("the open's stack does not follow the allocating frame", names)
        assert not any(n.startswith("poolscope_") for n in names), names
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
assert s["pool_hits"] == (0 if mode == "pool0" else 3), s
assert sites["leak_large_in_arena"]["pool_hits"] == 0, sites["leak_large_in_arena"]
# The closed arenas' blocks were allocated in the function that opened them: its frame once, then main.
for st in r["sites"]:
    names = [f["function"] for f in st["stack"]]
    if names and names[0] == "rounds_of_closed_arenas":
        assert names[1] == "main", ("the opening function's frame twice, or a frame missing", names)
closed = sites["rounds_of_closed_arenas"]
assert closed["logical_allocs"] == 400, closed
assert closed["real_allocs"] >= 200, closed  # the 700-byte blocks take the regular path
small = sites["rounds_of_small_arenas"]
assert small["logical_allocs"] == 400, small
assert small["pool_hits"] == (0 if mode == "pool0" else 400), small
print("ok", mode, by_fn)
PY
done
echo PASS
