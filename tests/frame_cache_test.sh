#!/bin/bash
# Frame rules kept between processes ($XDG_CACHE_HOME/poolscope/frames): python3 (PYTHONMALLOC=malloc)
# runs the same script four times. The first computes every frame rule and leaves files behind; the
# second reads nearly all of them (internal.frame_rules_from_cache) and computes at most a quarter as
# many; both have the same stdout as a bare run and the same symbolized stacks for their sites. Every
# file then damaged (a byte of its table changed): the third run reads none of them and computes them
# all again, still with the same stacks, and writes them anew, which the fourth reads. A cache path
# that cannot be made (under a regular file) changes nothing but the time.
# Args: LIB CHECKER
set -euo pipefail
source "$(dirname "$0")/integration_lib.sh"
integration_init "$1" "$2"

cat >"$WORK/work.py" <<'PY'
import json
rows = [{"id": i, "name": "row %d" % i, "tags": [str(i % 7), "t"]} for i in range(3000)]
text = json.dumps(rows)
back = json.loads(text)
print(len(back), sum(len(r["name"]) for r in back))
PY
CACHE=$WORK/cache
export PYTHONHASHSEED=0
run() {  # run MODE CACHE_HOME
  run_with_options py "$1" "quiet=1:report=@REPORT@" /dev/null PYTHONMALLOC=malloc XDG_CACHE_HOME="$2" \
    -- /usr/bin/python3 "$WORK/work.py"
  cmp -s "$WORK/py/bare/stdout" "$WORK/py/$1/stdout" || fail "py/$1: stdout differs from the bare run"
  [ "$(cat "$WORK/py/$1/status")" = 0 ] || fail "py/$1: exit status $(cat "$WORK/py/$1/status")"
  reports_ok py "$1" 1
}
run_with_options py bare - /dev/null PYTHONMALLOC=malloc -- /usr/bin/python3 "$WORK/work.py"
run first "$CACHE"
ls "$CACHE"/poolscope/frames/*.rules >/dev/null 2>&1 || fail "the first run left no frame rules in $CACHE/poolscope/frames"
run second "$CACHE"
for f in "$CACHE"/poolscope/frames/*.rules; do
  "$PY" - "$f" <<'PY'
import sys
path = sys.argv[1]
data = bytearray(open(path, "rb").read())
data[40] ^= 0x10
open(path, "wb").write(bytes(data))
PY
done
run damaged "$CACHE"
run rewritten "$CACHE"
touch "$WORK/not_a_dir"
run blocked "$WORK/not_a_dir"

"$PY" - "$WORK/py" <<'PY' || fail "frame rules: see above"
import glob, json, os, sys
base = sys.argv[1]
def report(mode):
    (path,) = glob.glob(os.path.join(base, mode, "reports", "*.json"))
    return json.load(open(path))
def stacks(r):
    return sorted(tuple((f.get("function"), os.path.basename(f.get("object") or "")) for f in s["stack"])
                  for s in r["sites"])
runs = {m: report(m) for m in ("first", "second", "damaged", "rewritten", "blocked")}
got = {m: (r["internal"]["frame_rules_computed"], r["internal"]["frame_rules_from_cache"]) for m, r in runs.items()}
print("computed, from the cache:", got)
first, second = got["first"], got["second"]
assert first[0] >= 100 and first[1] == 0, f"the first run: {first}"
assert second[1] >= first[0] // 2, f"the second run read {second[1]} rules of the {first[0]} the first computed"
assert second[0] * 4 <= first[0], f"the second run computed {second[0]} rules, the first {first[0]}"
assert got["damaged"][1] == 0 and got["damaged"][0] * 2 >= first[0], f"damaged files were read: {got['damaged']}"
assert got["rewritten"][1] >= first[0] // 2, f"the damaged files were not written again: {got['rewritten']}"
assert got["blocked"][1] == 0 and got["blocked"][0] * 2 >= first[0], f"blocked: {got['blocked']}"
for m in ("second", "damaged", "rewritten", "blocked"):
    assert stacks(runs[m]) == stacks(runs["first"]), f"{m}: the sites' stacks differ from the first run's"
PY
echo "PASS: frame rules computed once, read by the next runs; damaged files and a blocked path change no stack"
