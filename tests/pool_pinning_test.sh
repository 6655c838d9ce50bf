#!/bin/bash
# Per-site pinning (sites[].pools_pinned, pinned_bytes): tests/programs/pinning.c interleaves two
# sites' 16-byte blocks in 64-byte pools, one kept block and three young ones a pool, then frees the
# young ones. The program itself counts how many kept blocks start a pool (the pools they pin, one
# each: N when the interleaving held); the report must say keep_block pins that many pools and
# young_block none, while young_block's allocations were all served from pools (pool_hits = 3N,
# real_allocs 0). `poolscope report` (text and HTML) and `poolscope compare` list keep_block first among
# the pinning sites and young_block as the site pooling saves most at. With pooling off no site pins anything.
# Args: LIB CHECKER PINNING POOLSCOPE
set -euo pipefail
lib=$(readlink -f "$1"); checker=$(readlink -f "$2"); prog=$(readlink -f "$3"); poolscope=$(readlink -f "$4")
work=${TEST_TMPDIR:-$(mktemp -d)}/pool_pinning
mkdir -p "$work"
for pool in 1 0; do
  out=$(LD_PRELOAD="$lib" POOLSCOPE_OPTIONS="pool=$pool:pool_size=64:quiet=1:report=$work/r$pool.json" "$prog")
  /usr/bin/python3 "$checker" "$work/r$pool.json"
  /usr/bin/python3 - "$work/r$pool.json" "$pool" "$out" <<'PY'
import json, re, sys
r = json.load(open(sys.argv[1])); pool = int(sys.argv[2])
m = re.match(r"(\d+) kept blocks, (\d+) at a pool's start", sys.argv[3])
assert m, "program output: %r" % sys.argv[3]
n, starts = int(m.group(1)), int(m.group(2))

def site(name):
    found = [s for s in r["sites"] if any(f.get("function") == name for f in s["stack"][:1])]
    assert len(found) == 1, "pool=%d: %d sites for %s" % (pool, len(found), name)
    return found[0]

keep, young = site("keep_block"), site("young_block")
for s in r["sites"]:
    assert s["pools_pinned"] >= 0 and s["pinned_bytes"] >= 0
if pool == 1:
    assert starts == n, "the interleaving did not hold: %d of %d kept blocks start a pool" % (starts, n)
    assert keep["pools_pinned"] == n, "keep_block pins %d pools, expected %d" % (keep["pools_pinned"], n)
    assert young["pools_pinned"] == 0, "young_block pins %d pools, expected 0" % young["pools_pinned"]
    per_pool = keep["pinned_bytes"] // n
    # (a pool's real allocation: its 64 bytes, its metadata with tracking and the alignment's slack)
    assert keep["pinned_bytes"] == per_pool * n and 64 <= per_pool <= 256, keep
    assert young["pool_hits"] == 3 * n and young["real_allocs"] == 0, young
    assert keep["pool_hits"] == n, keep
else:
    pinned = [(s["pools_pinned"], s["pinned_bytes"]) for s in r["sites"] if s["pools_pinned"] or s["pinned_bytes"]]
    assert not pinned, "pool=0: sites pin pools: %r" % pinned
    assert young["real_allocs"] == 3 * n, young
print("pool=%d ok" % pool)
PY
done
text=$("$poolscope" report "$work/r1.json")
section=$(sed -n '/^POOLS PINNED AT EXIT/,/^$/p' <<<"$text")
[ -n "$section" ] || { echo "FAIL: the text report has no POOLS PINNED AT EXIT section"; exit 1; }
[[ "$(sed -n 3p <<<"$section")" == "      keep_block "* ]] || { echo "FAIL: keep_block is not the first pinning site: $section"; exit 1; }
grep -q '^  #1  50 pools (' <<<"$section" || { echo "FAIL: #1 does not pin 50 pools: $section"; exit 1; }
grep -q '^  pooling saves most at: young_block .*(150 real allocations avoided, 0 pools pinned)' <<<"$section" \
  || { echo "FAIL: young_block is not where pooling saves most: $section"; exit 1; }
# The HTML page's section, and compare's two lines (pooling on), name the same sites.
page=$("$poolscope" report --format=html "$work/r1.json")
first_row=$(sed -n '/<section id="pinning">/,/<\/section>/p' <<<"$page" | grep -m1 '^<tr><td class="n">1</td>' || true)
[[ "$first_row" == *'<td class="n">50</td>'*'keep_block '* ]] || { echo "FAIL: the HTML page's pinning table starts with: $first_row"; exit 1; }
grep -q '<p class="saver">Pooling saves most at <code>young_block ' <<<"$page" \
  || { echo "FAIL: the HTML page does not name young_block where pooling saves most"; exit 1; }
cmp_out=$(cd "$work" && "$poolscope" compare --options=pool_size=64 -- "$prog" 2>/dev/null)
grep -q '^pools pinned at exit, most by: keep_block .*(50 pools, ' <<<"$cmp_out" \
  || { echo "FAIL: compare does not name keep_block as pinning most: $cmp_out"; exit 1; }
grep -q '^pooling saves most at: young_block .*(150 real allocations avoided, 0 pools pinned)' <<<"$cmp_out" \
  || { echo "FAIL: compare does not name young_block where pooling saves most: $cmp_out"; exit 1; }
text0=$("$poolscope" report "$work/r0.json")
if grep -q '^POOLS PINNED AT EXIT' <<<"$text0"; then
  echo "FAIL: pool=0's report lists pinning sites"; exit 1
fi
echo PASS
