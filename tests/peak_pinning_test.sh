#!/bin/bash
# Pools pinned at the peak of real live bytes (sites[].peak_pools_pinned, pinning_peak):
# tests/programs/pinning.c with M blocks of a third site, peak_block, all live at once after the
# young blocks are freed, then freed before exit. The program counts Q, the 64-byte pools those blocks
# filled. At exit peak_block pins no pool and keep_block exactly its N; at the peak keep_block still
# pins N, young_block none, and peak_block about Q: the snapshot is taken on the way down from the
# peak, at real live bytes of at least 31/32 of the highest a check saw less a check's fall
# (docs/report-schema.md; asserted here at 4/5), and the checks come every 256th pool a thread
# makes, so peak_block pins at least (Q - 256) * 4/5 pools less the few the other sites'
# pools and the program's own real blocks stand for (under 128 pools' worth), and at most Q.
# `poolscope report` (text and HTML) and `poolscope compare` name peak_block with both figures.
# With pooling off nothing is pinned and pinning_peak is null.
# A peak the program leaves with one large free and then exits (python3 with its objects pooled, an
# 8 MiB buffer freed last, os._exit: no regular check comes after the free) is still snapshotted at the
# top: large frees are checked before they happen, so the snapshot is within 1/32 of the highest seen
# and not the report's own moment (without that check it was the report's, at 0.77 of the highest).
# Args: LIB CHECKER PINNING POOLSCOPE
set -euo pipefail
lib=$(readlink -f "$1"); checker=$(readlink -f "$2"); prog=$(readlink -f "$3"); poolscope=$(readlink -f "$4")
work=${TEST_TMPDIR:-$(mktemp -d)}/peak_pinning
mkdir -p "$work"
m=80000
for pool in 1 0; do
  out=$(LD_PRELOAD="$lib" POOLSCOPE_OPTIONS="pool=$pool:pool_size=64:quiet=1:report=$work/r$pool.json" "$prog" $m)
  /usr/bin/python3 "$checker" "$work/r$pool.json"
  /usr/bin/python3 - "$work/r$pool.json" "$pool" "$out" <<'PY'
import json, re, sys
r = json.load(open(sys.argv[1])); pool = int(sys.argv[2])
m1 = re.search(r"(\d+) kept blocks, (\d+) at a pool's start", sys.argv[3])
m2 = re.search(r"peak: (\d+) blocks in (\d+) pools", sys.argv[3])
assert m1 and m2, "program output: %r" % sys.argv[3]
n, starts, q = int(m1.group(1)), int(m1.group(2)), int(m2.group(2))

def site(name):
    found = [s for s in r["sites"] if any(f.get("function") == name for f in s["stack"][:1])]
    assert len(found) == 1, "pool=%d: %d sites for %s" % (pool, len(found), name)
    return found[0]

keep, young, peak = site("keep_block"), site("young_block"), site("peak_block")
if pool == 0:
    assert r["pinning_peak"] is None, r["pinning_peak"]
    pinned = [s for s in r["sites"] if s["pools_pinned"] or s["peak_pools_pinned"]]
    assert not pinned, "pool=0: sites pin pools: %r" % pinned
    print("pool=0 ok")
    sys.exit(0)
assert starts == n, "the interleaving did not hold: %d of %d kept blocks start a pool" % (starts, n)
assert q * 4 >= int(m2.group(1)), "the peak's blocks fill at least M/4 pools of 64 bytes: %d" % q
pool_bytes = r["pool"]["pool_real_bytes"]
for s in r["sites"]:
    assert s["peak_pinned_bytes"] == s["peak_pools_pinned"] * pool_bytes, s
# At exit: the exact pools, as before the peak existed.
assert keep["pools_pinned"] == n, "keep_block pins %d pools at exit, expected %d" % (keep["pools_pinned"], n)
assert young["pools_pinned"] == 0, young
assert peak["pools_pinned"] == 0, "peak_block pins %d pools at exit, expected 0" % peak["pools_pinned"]
# At the peak.
p = r["pinning_peak"]
assert p["at_report"] is False, "no snapshot while the program ran: %r" % p
assert p["snapshots"] >= 1 and p["checks"] >= p["snapshots"], p
assert p["real_live_bytes"] * 5 >= p["max_real_live_bytes_seen"] * 4, "the snapshot is below 4/5 of the highest seen: %r" % p
assert keep["peak_pools_pinned"] == n, "keep_block pins %d pools at the peak, expected %d" % (keep["peak_pools_pinned"], n)
assert young["peak_pools_pinned"] == 0, young
low = (q - 256) * 4 // 5 - 128
assert low <= peak["peak_pools_pinned"] <= q, \
    "peak_block pins %d pools at the peak, expected %d..%d" % (peak["peak_pools_pinned"], low, q)
print("pool=1 ok: peak_block pinned %d of its %d pools at the peak (%d snapshots, %d checks)"
      % (peak["peak_pools_pinned"], q, p["snapshots"], p["checks"]))
PY
done
text=$("$poolscope" report "$work/r1.json")
section=$(sed -n '/^POOLS PINNED AT EXIT/,/^$/p' <<<"$text")
grep -q '^  and at the peak of real live bytes, ' <<<"$section" || { echo "FAIL: the text report does not say when the peak was: $section"; exit 1; }
grep -q '^  #1  0 pools (0 B) pinned at exit, [0-9,]* (.*) at the peak; ' <<<"$section" \
  || { echo "FAIL: #1 does not show peak_block's peak beside its exit: $section"; exit 1; }
[[ "$(sed -n 4p <<<"$section")" == "      peak_block "* ]] || { echo "FAIL: peak_block is not the first pinning site: $section"; exit 1; }
grep -q '^  #2  50 pools (.*) pinned; ' <<<"$section" || { echo "FAIL: #2 is not keep_block's 50 pools alone: $section"; exit 1; }
page=$("$poolscope" report --format=html "$work/r1.json")
first_row=$(sed -n '/<section id="pinning">/,/<\/section>/p' <<<"$page" | grep -m1 '^<tr><td class="n">1</td>' || true)
[[ "$first_row" == *'<td class="n">0</td><td class="n">0 B</td><td class="n">'[0-9]*' ('*')</td>'*'peak_block '* ]] \
  || { echo "FAIL: the HTML page's pinning table starts with: $first_row"; exit 1; }
cmp_out=$(cd "$work" && "$poolscope" compare --options=pool_size=64 -- "$prog" $m 2>/dev/null)
grep -q '^pools pinned at exit or at the peak, most by: peak_block .*(0 pools, 0 B at exit; [0-9,]*, .* at the peak; ' <<<"$cmp_out" \
  || { echo "FAIL: compare does not name peak_block with its peak: $cmp_out"; exit 1; }
cat >"$work/fall.py" <<'PY'
import os
keep = [str(i) for i in range(200000)]
big = bytearray(8 << 20)
more = [str(i) for i in range(20000)]
del big
os._exit(0)
PY
PYTHONMALLOC=malloc LD_PRELOAD="$lib" POOLSCOPE_OPTIONS="quiet=1:reachability=0:report=$work/fall.json" \
  /usr/bin/python3 "$work/fall.py"
/usr/bin/python3 - "$work/fall.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))["pinning_peak"]
assert p["at_report"] is False, "the peak before the large free was not snapshotted: %r" % p
assert p["real_live_bytes"] * 32 >= p["max_real_live_bytes_seen"] * 31, "the snapshot is below 31/32 of the highest seen: %r" % p
print("large free ok: %r" % p)
PY
echo PASS
