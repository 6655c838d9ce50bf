#!/bin/bash
# Nothing of poolscope's in a C program's address space or ledgers (tests/programs/own_objects.c).
# 1. The shared objects mapped at the start of main under poolscope (default options, pool=0 and
#    pool=1) are the bare run's plus libpoolscope.so, nothing else: no C++ runtime, unwinder or
#    elfutils library is loaded at start.
# 2. Its report counts exactly the program's own calls: 23 mallocs and 20 frees, no other entry point,
#    3 blocks of 1000 bytes live, and one leak group, those 3 blocks, allocated in leak_three, with
#    file:line (libdw loaded when the report is written); no frame of any leak in a C++ runtime.
# 3. When libdw cannot be loaded (a file named libdw.so.1 that is not an ELF object, first on
#    LD_LIBRARY_PATH): exit status and stdout as before, one warning line naming libdw on stderr, and
#    the leak's frames give objects and offsets only.
# Args: LIB CHECKER OWN_OBJECTS
set -euo pipefail
source "$(dirname "$0")/integration_lib.sh"
integration_init "$1" "$2"
prog=$(abspath "$3")

run_with_options own_objects bare - /dev/null -- "$prog"
[ "$(cat "$WORK/own_objects/bare/status")" = 0 ] || fail "the bare run exited $(cat "$WORK/own_objects/bare/status")"
grep -q '/libc\.so\.6$' "$WORK/own_objects/bare/stdout" || fail "the bare run lists no libc.so.6: $(cat "$WORK/own_objects/bare/stdout")"
sort -u "$WORK/own_objects/bare/stdout" > "$WORK/own_objects/bare.objects"
! grep -q -e libstdc++ -e libgcc_s "$WORK/own_objects/bare.objects" ||
  fail "the program maps a C++ runtime itself (linked with libstdc++?): $(cat "$WORK/own_objects/bare.objects")"
# A fresh symbol cache, so that every frame is symbolized by libdw in this test.
export XDG_CACHE_HOME=$WORK/own_objects/cache
for mode in defaults pool0 pool1; do
  case $mode in
    defaults) opts="quiet=1:report=@REPORT@" ;;
    pool0) opts="pool=0:quiet=1:report=@REPORT@" ;;
    pool1) opts="pool=1:quiet=1:report=@REPORT@" ;;
  esac
  rm -rf "$XDG_CACHE_HOME"
  run_with_options own_objects "$mode" "$opts" /dev/null -- "$prog"
  dir=$WORK/own_objects/$mode
  [ "$(cat "$dir/status")" = 0 ] || fail "$mode: exit status $(cat "$dir/status"); stderr: $(head -c 2000 "$dir/stderr")"
  [ ! -s "$dir/stderr" ] || fail "$mode: stderr with quiet=1: $(head -c 2000 "$dir/stderr")"
  sort -u "$dir/stdout" > "$dir/objects"
  extra=$(comm -13 "$WORK/own_objects/bare.objects" "$dir/objects")
  gone=$(comm -23 "$WORK/own_objects/bare.objects" "$dir/objects")
  [ -z "$gone" ] || fail "$mode: objects of the bare run missing under poolscope: $gone"
  [ "$extra" = "$LIB" ] || fail "$mode: objects mapped under poolscope besides the bare run's: $(echo "$extra" | tr '\n' ' ') (expected only $LIB)"
  note "$mode: mapped as bare plus $(basename "$LIB")"
  reports_ok own_objects "$mode" "$([ "$mode" = pool0 ] && echo 0 || echo 1)"
  single_report own_objects "$mode" own_objects
  "$PY" - "$dir"/reports/r.*.json "$mode" <<'PY' || fail "$mode: the report counts more than the program's own calls"
import json, sys
r, mode = json.load(open(sys.argv[1])), sys.argv[2]
lg = r["logical"]
calls = {k: v for k, v in lg["by_api"].items() if v != 0}
assert calls == {"malloc": 23, "free": 20}, f"logical.by_api: {calls}, the program calls malloc 23 and free 20 times"
got = (lg["allocs"], lg["frees"], lg["reallocs"], lg["live_blocks"], lg["live_bytes"])
assert got == (23, 20, 0, 3, 3000), f"logical allocs, frees, reallocs, live blocks, live bytes: {got}, expected (23, 20, 0, 3, 3000)"
leaks = r["leaks"]
for g in leaks:
    for f in g["stack"]:
        where = (f.get("function") or "") + " " + (f.get("object") or "")
        assert "libstdc++" not in where and "libgcc_s" not in where, f"a leak with a C++ runtime frame: {f}"
assert len(leaks) == 1 and (leaks[0]["blocks"], leaks[0]["bytes"]) == (3, 3000), \
    f"leak groups {[(g['blocks'], g['bytes'], [f.get('function') for f in g['stack'][:3]]) for g in leaks]}, expected one of 3 blocks, 3000 bytes"
frames = leaks[0]["stack"]
at = [f for f in frames if f.get("function") == "leak_three"]
assert at and at[0].get("file", "").endswith("own_objects.c") and at[0].get("line", 0) > 0, \
    f"the leak's stack does not name leak_three with its line: {frames[:4]}"
print(f"ok: {mode}: 23 mallocs, 20 frees, one leak of 3 blocks in leak_three ({at[0]['file']}:{at[0]['line']})")
PY
done

# Without libdw: a file that is not an ELF object stands first on the library path.
mkdir -p "$WORK/own_objects/nolibdw_path"
: > "$WORK/own_objects/nolibdw_path/libdw.so.1"
rm -rf "$XDG_CACHE_HOME"
run_with_options own_objects nolibdw "quiet=0:report=@REPORT@" /dev/null \
  LD_LIBRARY_PATH="$WORK/own_objects/nolibdw_path" -- "$prog"
dir=$WORK/own_objects/nolibdw
[ "$(cat "$dir/status")" = 0 ] || fail "nolibdw: exit status $(cat "$dir/status")"
# The same objects as with libdw (as a set: their order in /proc/self/maps follows where the loader
# happened to place them), so the missing libdw was never loaded.
sort -u "$dir/stdout" > "$dir/objects"
cmp -s "$dir/objects" "$WORK/own_objects/pool1/objects" ||
  fail "nolibdw: objects mapped differ from the run with libdw: $(diff "$WORK/own_objects/pool1/objects" "$dir/objects" | tr '\n' ' ')"
warnings=$(grep -c 'warning: cannot load libdw' "$dir/stderr" || true)
others=$(grep -v -e 'warning: cannot load libdw' -e 'report written to' "$dir/stderr" || true)
[ "$warnings" = 1 ] && [ -z "$others" ] || fail "nolibdw: expected one libdw warning line besides the report line, stderr: $(cat "$dir/stderr")"
"$PY" - "$dir"/reports/r.*.json <<'PY' || fail "nolibdw: the report's stacks"
import json, sys
r = json.load(open(sys.argv[1]))
leaks = r["leaks"]
assert len(leaks) == 1 and leaks[0]["blocks"] == 3, f"leak groups: {leaks}"
for f in leaks[0]["stack"]:
    assert not f.get("file") and not f.get("line"), f"a frame with file:line without libdw: {f}"
    base = (f.get("object") or "").rsplit("/", 1)[-1]
    assert base and f.get("function", "").startswith(base + "+0x"), f"a frame that is not object+offset: {f}"
print(f"ok: nolibdw: {len(leaks[0]['stack'])} frames, objects and offsets only")
PY
echo "PASS: a C program maps what it maps bare plus libpoolscope.so, and its report counts its own calls only"
