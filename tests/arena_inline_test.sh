#!/bin/bash
# poolscope_arena_alloc inline (poolscope.h): the program carves in its own code, and the ledgers stay
# exact. R rounds of open, 4 B, 20 B and 40 B, close, then one arena held open with 100 blocks of 1..100
# bytes, waiting for a snapshot (R = 20000):
# - with pool=1 track=0 the program sees an inline view (inline=1), and the exit report counts 3R + 100
#   arena blocks and R + 1 closes; with pool_size=8192 every one of them is a pool hit (tag=explicit:
#   nothing else is pooled), so pool.hits is exactly 3R + 100 and pooled_live_blocks 0;
# - the snapshot taken while the 100-block arena is open counts them: 3R + 100 blocks, R closes, 3R + 100
#   hits, pooled_live_blocks 100, at least 100 live logical blocks;
# - with track=1 (every block a call) the same figures, and inline=0;
# - the default pool size (64 B): the 40 B blocks take the regular path; the same counts of calls;
# - without the preload library the client's malloc fallback serves the program (inline=0);
# - against a preload library whose arenas are of another layout (a stand-in that counts the blocks it
#   serves by calls and those carved from its arenas inline), with no layout symbol and with layout 2,
#   every block is a call; with layout 1 (the stand-in claiming this header's layout) blocks are carved
#   inline, which shows the stand-in would catch a client that handed out unchecked arenas.
# Args: LIB CHECKER ARENA_INLINE FAKE_OLD_LIB FAKE_LAYOUT_LIB
set -euo pipefail
lib=$(readlink -f "$1"); checker=$(readlink -f "$2"); prog=$(readlink -f "$3")
fake_old=$(readlink -f "$4"); fake_layout=$(readlink -f "$5")
work=${TEST_TMPDIR:-$(mktemp -d)}/arena_inline
mkdir -p "$work"
R=20000
fail() { echo "FAIL: $*" >&2; exit 1; }

out=$("$prog" $R) || fail "bare run: $out"
[ "$out" = "arena_inline ok inline=0" ] || fail "bare run printed '$out'"

run() {  # NAME OPTIONS [snapshot]
  local name=$1 opts=$2
  rm -f "$work/$name".*
  if [ "${3:-}" = snapshot ]; then
    out=$(LD_PRELOAD="$lib" POOLSCOPE_OPTIONS="$opts:quiet=1:snapshot_interval=1:report=$work/$name.json" \
          "$prog" $R "$work/$name.json" "$work/$name.snap.json") || fail "$name: exit $?: $out"
  else
    out=$(LD_PRELOAD="$lib" POOLSCOPE_OPTIONS="$opts:quiet=1:report=$work/$name.json" "$prog" $R) ||
      fail "$name: exit $?: $out"
  fi
  echo "$out" > "$work/$name.out"
  /usr/bin/python3 "$checker" "$work/$name.json"
}

run inline "pool=1:track=0:tag=explicit:pool_size=8192" snapshot
run tracked "pool=1:track=1:tag=explicit:pool_size=8192" snapshot
run small "pool=1:track=0:tag=explicit"
[ "$(cat "$work/inline.out")" = "arena_inline ok inline=1" ] || fail "inline: $(cat "$work/inline.out")"
[ "$(cat "$work/tracked.out")" = "arena_inline ok inline=0" ] || fail "tracked: $(cat "$work/tracked.out")"
[ "$(cat "$work/small.out")" = "arena_inline ok inline=1" ] || fail "small: $(cat "$work/small.out")"

/usr/bin/python3 - "$work" $R <<'PY'
import json, sys
work, R = sys.argv[1], int(sys.argv[2])
blocks = 3 * R + 100
for name in ("inline", "tracked"):
    r = json.load(open(f"{work}/{name}.json"))
    by_api, pool = r["logical"]["by_api"], r["pool"]
    assert r["process"]["reason"] == "exit", r["process"]
    assert by_api["poolscope_arena_alloc"] == blocks, (name, by_api)
    assert by_api["poolscope_arena_close"] == R + 1, (name, by_api)
    assert pool["hits"] == blocks, (name, pool)
    assert pool["pooled_live_blocks"] == 0, (name, pool)
    s = json.load(open(f"{work}/{name}.snap.json"))
    by_api, pool = s["logical"]["by_api"], s["pool"]
    assert s["process"]["reason"] == "snapshot", s["process"]
    assert by_api["poolscope_arena_alloc"] == blocks, (name, "snapshot", by_api)
    assert by_api["poolscope_arena_close"] == R, (name, "snapshot", by_api)
    assert pool["hits"] == blocks, (name, "snapshot", pool)
    assert pool["pooled_live_blocks"] == 100, (name, "snapshot", pool)
    assert s["logical"]["live_blocks"] >= 100, (name, "snapshot", s["logical"])
    print("ok", name, "exit and snapshot:", blocks, "blocks")
r = json.load(open(f"{work}/small.json"))
by_api, pool = r["logical"]["by_api"], r["pool"]
assert by_api["poolscope_arena_alloc"] == blocks, by_api
assert by_api["poolscope_arena_close"] == R + 1, by_api
# 4 B at 0 and 20 B at 8 fit a 64-byte pool; 40 B (16-aligned, at 32) does not.
assert pool["hits"] >= 2 * R, pool
assert pool["misses"]["pool_full"] >= R, pool["misses"]
# The held arena's blocks of 65..100 bytes (36) are too large for a pool; every other block a hit or a
# full pool's miss (plain mallocs are never pooled with tag=explicit, so never pool_full).
assert pool["hits"] + pool["misses"]["pool_full"] == blocks - 36, pool
print("ok small pools:", pool["hits"], "hits")
PY

for variant in "old:$fake_old:" "layout2:$fake_layout:2" "layout1:$fake_layout:1"; do
  IFS=: read -r name fake layout <<< "$variant"
  rm -f "$work/fake.$name"
  status=0
  out=$(LD_PRELOAD="$fake" FAKE_LAYOUT="$layout" FAKE_OUT="$work/fake.$name" "$prog" $R) || status=$?
  counts=$(cat "$work/fake.$name")
  case $name in
    layout1)
      # The stand-in claims this layout: the client hands its arenas out as they are, and the
      # program carves from them inline (over blocks the stand-in also hands out: the program's
      # own checks may fail, so its status is not looked at).
      [[ $counts == "calls="*" inline=0" ]] && fail "fake $name: nothing carved inline ($counts)"
      ;;
    *)
      [ $status -eq 0 ] || fail "fake $name: exit $status: $out"
      [ "$out" = "arena_inline ok inline=0" ] || fail "fake $name printed '$out'"
      [ "$counts" = "calls=$((3 * R + 100)) inline=0" ] || fail "fake $name: $counts"
      ;;
  esac
  echo "ok fake $name: $counts"
done
echo PASS
