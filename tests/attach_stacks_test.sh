#!/bin/bash
# Attached, a report's stacks start at the program's frame. tests/programs/self_attach.c loads
# libpoolscope.so into itself as `poolscope attach` has gdb do it (POOLSCOPE_ATTACH, dlopen,
# poolscope_attach_start), so its calls reach the library through the GOT hooks of
# interpose/attach.cc, as in an attached process, without gdb (which cannot call functions in a
# process on machines where gdb 13 meets AMX state). It leaks 3 x 40 bytes from leak_by_malloc and
# 2 x 24 bytes from leak_by_calloc. For pool=1 and pool=0, and stack_depth 16 (the default) and 64
# (the most): those two groups start at leak_by_malloc and leak_by_calloc, and no frame at the top of
# a leak's or a site's stack lies in libpoolscope.so (before the fix, HookMalloc and HookCalloc did).
# The report is complete and its identities hold.
# Args: LIB CHECKER POOLSCOPE SELF_ATTACH
set -euo pipefail
source "$(dirname "$0")/integration_lib.sh"
integration_init "$1" "$2"
POOLSCOPE=$(abspath "$3")
prog=$(abspath "$4")
# glibc's default room for the static TLS of objects loaded with dlopen, as a user's process has it:
# the program links libstdc++ (bazel's default), and libpoolscope.so's static TLS must fit beside it
# (1,712 bytes did not: "cannot allocate memory in static TLS block").
unset GLIBC_TUNABLES

for pool in 1 0; do
  for depth in 16 64; do
    dir=$WORK/pool$pool.depth$depth
    mkdir -p "$dir"
    status=0
    timeout -k 5 "$RUN_TIMEOUT" "$prog" "$LIB" "quiet=1:pool=$pool:stack_depth=$depth:report=$dir/r.json" \
      >"$dir/stdout" 2>"$dir/stderr" || status=$?
    [ "$status" = 0 ] || fail "pool=$pool stack_depth=$depth: exit status $status: $(cat "$dir/stdout" "$dir/stderr")"
    grep -q '^attached [1-9]' "$dir/stdout" || fail "pool=$pool: no attach: $(cat "$dir/stdout")"
    "$POOLSCOPE" check "$dir/r.json" >/dev/null || fail "pool=$pool: $("$POOLSCOPE" check "$dir/r.json")"
    "$PY" - "$dir/r.json" "$(basename "$LIB")" <<'PY' || fail "pool=$pool stack_depth=$depth: stacks: see above"
import json, sys
r, lib = json.load(open(sys.argv[1])), sys.argv[2]
assert r["process"].get("attached_ns"), "not an attach report"
def top(stack):
    return stack[0] if stack else {}
bad = [(g.get("function"), g.get("object")) for g in
       [top(x["stack"]) for x in r["leaks"] + r["sites"]] if (g.get("object") or "").endswith("/" + lib)]
assert not bad, f"stacks that start in {lib}: {bad}"
want = {(3, 120): "leak_by_malloc", (2, 48): "leak_by_calloc"}
for leak in r["leaks"]:
    name = want.pop((leak["blocks"], leak["bytes"]), None)
    if name is not None:
        first = top(leak["stack"]).get("function")
        assert first == name, f"the {leak['blocks']} x {leak['bytes']} B group starts at {first}, not {name}"
        assert leak["stack"][1].get("function") == "main", f"{name}'s caller: {leak['stack'][1]}"
assert not want, f"groups missing: {want}; leaks: {[(l['blocks'], l['bytes']) for l in r['leaks']]}"
PY
    note "pool=$pool stack_depth=$depth: every stack starts at the program's frame"
  done
done
echo PASS
