#!/bin/bash
# Allocations inside a signal handler (tests/programs/signal_alloc.c): the stack walk from the
# allocating frame meets the kernel's signal frame, which only the fallback unwinder reads. The process
# must finish (a capture that cannot go on from the program's frame once looped forever), print what it
# prints bare, and the report must put the kept 777-byte block on on_signal with the frames above the
# signal frame (raise, deep_caller) in its stack. Pooling on and off.
# Args: LIB CHECKER SIGNAL_ALLOC
set -euo pipefail
lib=$(readlink -f "$1"); checker=$(readlink -f "$2"); prog=$(readlink -f "$3")
work=${TEST_TMPDIR:-$(mktemp -d)}/signal_alloc
mkdir -p "$work"
bare=$("$prog")
for pool in 1 0; do
  status=0
  out=$(timeout 20 env LD_PRELOAD="$lib" POOLSCOPE_OPTIONS="pool=$pool:quiet=1:report=$work/r$pool.json" "$prog") ||
    status=$?
  [ "$status" -eq 0 ] || { echo "FAIL: exit status $status with pool=$pool (124: it did not finish in 20 s)"; exit 1; }
  [ "$out" = "$bare" ] || { echo "FAIL: output differs with pool=$pool"; exit 1; }
  /usr/bin/python3 "$checker" "$work/r$pool.json"
  /usr/bin/python3 - "$work/r$pool.json" "$pool" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); pool = int(sys.argv[2])
kept = [g for g in r["leaks"] if g["bytes"] == 777]
assert len(kept) == 1 and kept[0]["blocks"] == 1, "pool=%d: groups of the kept block: %r" % (pool, kept)
names = [f["function"] for f in kept[0]["stack"]]
assert names[0] == "on_signal", "pool=%d: innermost frame %r" % (pool, names)
assert "raise" in names and "deep_caller" in names, "pool=%d: the stack stops at the signal frame: %r" % (pool, names)
PY
done
echo "PASS: allocations in a signal handler are recorded through the signal frame (pool=1 and pool=0)"
