#!/bin/bash
# The inline pooled fast paths count less than the slow paths and leave the rest to be settled when
# the counters are read (interpose/counters.h). The settled figures must be the slow paths' own:
#  - size_mix with tag=small (the inline malloc and new serve what they can) and with tag=caller
#    matching the program itself (the same requests pooled, every one through the slow paths) reports
#    the same ledgers, size histogram and pool counts; only the reason of a miss may differ (a request
#    from outside the program that is too large in one run is untagged in the other);
#  - the same with malloc_align=8 (no inline carve; pooled mallocs counted out of line in the table);
#  - with track=1 (no inline path at all, no LIFO free) the ledgers, sizes and hits are the same again;
#  - LIFO pairs on an empty pool (the inline free that leaves the pool fresh) are each one pooled free
#    and one reset in place.
# Args: LIB CHECKER SIZE_MIX
set -euo pipefail
lib=$(readlink -f "$1"); checker=$(readlink -f "$2"); prog=$(readlink -f "$3")
work=${TEST_TMPDIR:-$(mktemp -d)}/fast_path_agreement
mkdir -p "$work"
"$prog" 20 > "$work/bare.out"
run() {  # run NAME OPTIONS ARGS...
  local name=$1 options=$2
  shift 2
  LD_PRELOAD="$lib" POOLSCOPE_OPTIONS="pool_size=256:$options:quiet=1:report=$work/$name.json" \
    "$prog" "$@" > "$work/$name.out"
  /usr/bin/python3 "$checker" "$work/$name.json"
}
run fast "track=0:tag=small" 20
run slow "track=0:tag=caller:$prog" 20
run tracked "track=1:tag=small" 20
run pairs "track=0:tag=small" 20 pairs
run fast8 "track=0:tag=small:malloc_align=8" 20
run slow8 "track=0:tag=caller:$prog:malloc_align=8" 20
for name in fast slow tracked fast8 slow8; do
  cmp "$work/bare.out" "$work/$name.out" || { echo "FAIL: output differs ($name)"; exit 1; }
done
/usr/bin/python3 - "$work" <<'PY'
import json, sys
fast, slow, tracked, pairs, fast8, slow8 = (json.load(open("%s/%s.json" % (sys.argv[1], n)))
                                          for n in ("fast", "slow", "tracked", "pairs", "fast8", "slow8"))
assert slow["options"]["tag"].startswith("caller:") and fast["options"]["tag"] == "small"
assert fast["pool"]["hits"] >= 20 * 256, fast["pool"]
# malloc_align=8 has no inline carve: its pooled mallocs are counted out of line, in the same table.
for f, s in ((fast, slow), (fast8, slow8)):
    for section in ("logical", "real", "sizes"):
        assert f[section] == s[section], (section, f[section], s[section])
    for key in ("hits", "resets_in_place", "pools_created", "pools_reused", "pools_released", "spills",
                "absorbs", "pooled_live_blocks"):
        assert f["pool"][key] == s["pool"][key], (key, f["pool"][key], s["pool"][key])
    assert sum(f["pool"]["misses"].values()) == sum(s["pool"]["misses"].values()), \
        (f["pool"]["misses"], s["pool"]["misses"])
assert fast8["options"]["malloc_align"] == 8 and fast8["logical"] == fast["logical"], fast8["options"]
tracked["logical"]["live_bytes"] = None  # known only with track=1
for section in ("logical", "sizes"):
    assert fast[section] == tracked[section], (section, fast[section], tracked[section])
assert fast["pool"]["hits"] == tracked["pool"]["hits"], (fast["pool"], tracked["pool"])
# 20 rounds of malloc(n)+free for n = 1..300: the 256 that fit the pool are LIFO pairs on an empty pool.
p, lg = pairs["pool"], pairs["logical"]
# (The C and C++ runtimes add a few mallocs of their own, never freed, above the pool's size.)
assert lg["by_api"]["free"] == 20 * 300 <= lg["by_api"]["malloc"] <= 20 * 300 + 4, lg["by_api"]
assert p["hits"] == 20 * 256 and p["resets_in_place"] == 20 * 256, p
assert p["pooled_live_blocks"] == 0, p
print("fast and slow paths agree:", fast["pool"]["hits"], "hits,", fast["pool"]["resets_in_place"], "resets")
PY
echo PASS
