#!/bin/bash
# Explicit arenas through the preload library: the program's own checks (zeroed blocks after a round
# filled them, alignment, nested arenas disjoint, large blocks on the regular path) hold with pooling
# on, off and without poolscope; the output is the same; the report's ledgers reconcile, every pooled
# round was a hit and at most a handful of pools were ever created for 100,000 rounds. With pooling
# on, a new thread's first pool is 64-byte aligned (pools come from malloc plus slack, not memalign).
# The inline arena paths count less than the slow paths and leave the rest to be settled (the carve
# table, interpose/counters.h): with track=0 (inline) and track=1 (every arena call on a slow path) the
# ledgers, the size histogram and the pool's counts must be the same.
# Args: LIB CHECKER ARENA_ROUNDS
set -euo pipefail
lib=$(readlink -f "$1"); checker=$(readlink -f "$2"); prog=$(readlink -f "$3")
work=${TEST_TMPDIR:-$(mktemp -d)}/arena_rounds
mkdir -p "$work"
bare=$("$prog")
for opts in "pool=1" "pool=0" "pool=1:track=0" "pool=1:pools=0"; do
  flag=; case $opts in pool=1*) flag=--pooled ;; esac
  out=$(LD_PRELOAD="$lib" POOLSCOPE_OPTIONS="$opts:quiet=1:report=$work/r.json" "$prog" $flag) ||
    { echo "FAIL ($opts): exit $?: $out"; exit 1; }
  [ "$out" = "$bare" ] || { echo "FAIL ($opts): output '$out' != '$bare'"; exit 1; }
  /usr/bin/python3 "$checker" "$work/r.json"
  /usr/bin/python3 - "$work/r.json" "$opts" <<'PY'
import json, sys
r, opts = json.load(open(sys.argv[1])), sys.argv[2]
p, by_api = r["pool"], r["logical"]["by_api"]
rounds, nested = 100000, 100
assert by_api.get("poolscope_arena_alloc") == 2 * (rounds + nested), by_api
assert by_api.get("poolscope_arena_close") == rounds + nested, by_api
if opts.startswith("pool=1"):
    # Every block fits a pool except the inner 1000-byte ones (too large) and the 20-byte block of the
    # rounds that ask for 64-byte alignment: after the int at offset 0 the next 64-byte boundary is
    # the pool's end (pool full, the regular path).
    full = sum(1 for r in range(rounds) if r % 7 == 6)
    assert p["misses"]["pool_full"] == full, p["misses"]
    assert p["misses"]["too_large"] >= nested, p["misses"]
    assert p["hits"] >= 2 * (rounds + nested) - nested - full, p
    if "pools=0" not in opts:
        # The closed pool comes back each round; the 8 short threads of --pooled make one each.
        assert p["pools_created"] <= 4 + 8, p
else:
    assert p["hits"] == 0, p
print("ok", opts, p["hits"], p["pools_created"])
PY
done
for track in 0 1; do
  LD_PRELOAD="$lib" POOLSCOPE_OPTIONS="pool=1:track=$track:quiet=1:report=$work/track$track.json" "$prog" > /dev/null
done
/usr/bin/python3 - "$work/track0.json" "$work/track1.json" <<'PY'
import json, sys
inline, slow = (json.load(open(f)) for f in sys.argv[1:])
for r in (inline, slow):
    for ledger in ("logical", "real"):
        r[ledger]["live_bytes"] = None  # known only with track=1
    # A tracked pool's real allocation also holds its blocks' sizes and stacks (in the same slack as
    # the rest of the metadata for the default pool, in more for large ones): the pools' bytes aside.
    r["real"]["bytes_requested"] -= r["pool"]["pools_created"] * r["pool"]["pool_real_bytes"]
assert inline["pool"]["pool_real_bytes"] <= slow["pool"]["pool_real_bytes"], "no room for tracking's words"
for section in ("logical", "real", "sizes"):
    assert inline[section] == slow[section], (section, inline[section], slow[section])
for key in ("hits", "misses", "pools_created", "pools_reused", "pools_released", "resets_in_place",
            "pooled_live_blocks"):
    assert inline["pool"][key] == slow["pool"][key], (key, inline["pool"][key], slow["pool"][key])
print("inline and slow arena paths agree:", inline["pool"]["hits"], "hits")
PY
echo PASS
