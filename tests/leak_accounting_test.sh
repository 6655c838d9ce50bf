#!/bin/bash
# Leak accounting, checked against a program whose leaks are known from its source
# (tests/programs/known_leaks.c, built -O2 -fomit-frame-pointer): with pooling on and off, the report
# names each leaking function with the exact block count and bytes, and the file:line of the
# allocating call in the test's source; the blocks the program freed never appear; the
# reconciliation balances and the detector view's unfreed blocks equal real.live_blocks.
# Args: LIB CHECKER KNOWN_LEAKS KNOWN_LEAKS_SOURCE
set -euo pipefail
lib=$(readlink -f "$1"); checker=$(readlink -f "$2"); prog=$(readlink -f "$3"); src=$(readlink -f "$4")
work=${TEST_TMPDIR:-$(mktemp -d)}/leak_accounting
mkdir -p "$work"
# Lines of the allocating calls, read from the source so the test follows edits to it.
entry_line=$(grep -n 'char\* p = malloc(24);' "$src" | cut -d: -f1)
session_line=$(grep -n 'void\* p = malloc(200);' "$src" | cut -d: -f1)
pair_line=$(grep -n 'sink = malloc(48); sink2 = malloc(48);' "$src" | cut -d: -f1)
[ -n "$entry_line" ] && [ -n "$session_line" ] && [ -n "$pair_line" ] || { echo "FAIL: allocation lines not found in $src"; exit 1; }
bare=$("$prog")
for pool in 1 0; do
  out=$(LD_PRELOAD="$lib" POOLSCOPE_OPTIONS="pool=$pool:quiet=1:report=$work/r$pool.json" "$prog")
  [ "$out" = "$bare" ] || { echo "FAIL: output differs with pool=$pool"; exit 1; }
  /usr/bin/python3 "$checker" "$work/r$pool.json"
  /usr/bin/python3 - "$work/r$pool.json" "$pool" "$entry_line" "$session_line" "$pair_line" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); pool = int(sys.argv[2])
entry_line, session_line, pair_line = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
leaks = r["leaks"]

def find(function):
    return [g for g in leaks if any(f["function"] == function for f in g["stack"])]

def check(function, caller, blocks, size, line):
    groups = find(function)
    assert len(groups) == 1, "pool=%d: %s in %d leak groups: %r" % (pool, function, len(groups), groups)
    g = groups[0]
    assert g["blocks"] == blocks and g["bytes"] == blocks * size, \
        "pool=%d: %s leaked %d blocks/%d bytes, expected %d/%d" % (pool, function, g["blocks"], g["bytes"], blocks, blocks * size)
    top = g["stack"][0]
    assert top["function"] == function, "pool=%d: innermost frame %r" % (pool, top)
    assert top.get("file", "").endswith("known_leaks.c") and top.get("line") == line, \
        "pool=%d: %s at %s:%s, expected known_leaks.c:%d" % (pool, function, top.get("file"), top.get("line"), line)
    names = [f["function"] for f in g["stack"]]
    assert caller in names and "main" in names, "pool=%d: stack %r" % (pool, names)
    return g

entries = check("make_entry", "leak_config_entries", 3, 24, entry_line)
check("session_alloc", "leak_session_buffers", 2, 200, session_line)
# Two calls on one line leave two return addresses that name the same frame: one group of both.
pair = find("leak_two_on_one_line")
assert len(pair) == 1 and pair[0]["blocks"] == 2 and pair[0]["bytes"] == 96, "pool=%d: %r" % (pool, pair)
assert pair[0]["stack"][0].get("line") == pair_line, "pool=%d: %r" % (pool, pair[0]["stack"][0])
# 24-byte blocks fit a 64-byte pool; 200-byte ones never do.
assert entries["pooled_blocks"] == (3 if pool else 0), entries
# What the program freed never shows up.
assert not find("churn") and not find("churn.constprop.0"), find("churn")
rec = r["reconciliation"]
assert rec["balanced"], rec
assert rec["detector_view"]["unfreed_blocks"] == r["real"]["live_blocks"], rec
assert r["logical"]["live_bytes"] is not None and r["logical"]["live_bytes"] >= 3 * 24 + 2 * 200
# The sites ledger: churn's malloc site made 1000 logical allocations; with pooling on the pools
# served them all, so it caused no real allocation.
site = [s for s in r["sites"] if s["stack"] and s["stack"][0]["function"].startswith("churn")
        and s["logical_allocs"] == 1000]
assert site, "no churn site with 1000 allocations: %r" % [(s["logical_allocs"], s["stack"][:1]) for s in r["sites"]]
# A thread's allocations all count, also those it made just before it ended.
worker = [s for s in r["sites"] if s["stack"] and s["stack"][0]["function"].startswith("worker_churn")]
assert [s["logical_allocs"] for s in worker] == [300], "worker_churn sites: %r" % [(s["logical_allocs"], s["stack"][:1]) for s in worker]
print("pool=%d ok: %d leak groups, %d sites" % (pool, len(leaks), len(r["sites"])))
PY
done
echo PASS
