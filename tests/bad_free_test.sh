#!/bin/bash
# Double and interior frees of pooled blocks are caught, counted under `errors`, reported with the
# function that made them, and change nothing: the program goes on and its other blocks are intact.
# Args: LIB CHECKER BAD_FREES
set -euo pipefail
lib=$(readlink -f "$1"); checker=$(readlink -f "$2"); prog=$(readlink -f "$3")
work=${TEST_TMPDIR:-$(mktemp -d)}/bad_free
mkdir -p "$work"
out=$(LD_PRELOAD="$lib" POOLSCOPE_OPTIONS="pool=1:quiet=1:report=$work/r.json" "$prog")
[ "$out" = "bad_frees: went on, keep=still here" ] || { echo "FAIL: output: $out"; exit 1; }
/usr/bin/python3 "$checker" "$work/r.json"
/usr/bin/python3 - "$work/r.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
e = r["errors"]
assert e["double_frees"] == 1 and e["invalid_frees"] == 1, e
kinds = {c["kind"]: [f["function"] for f in c["stack"]] for c in e["cases"]}
assert "free_twice" in kinds.get("double_free", []), kinds
assert "free_interior" in kinds.get("invalid_free", []), kinds
# The bad frees released nothing: every block the program allocated was freed exactly once.
assert r["logical"]["frees"] == r["logical"]["allocs"] - r["logical"]["live_blocks"], r["logical"]
print("ok", kinds)
PY
echo PASS
