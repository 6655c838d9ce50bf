#!/bin/bash
# Each mode of leak_shapes leaves the blocks its source describes, as memcheck classifies them
# (--leak-check=full --leak-check-heuristics=none, no freeres): a shape that drifts (the compiler
# keeping a stale pointer, a block freed or added) fails here, before anything compares poolscope's
# classification with memcheck's on it. Figures are over the `none` mode's, which holds what the
# runtimes keep whatever the program does. A live or joined thread adds glibc's thread control block
# extension (its dtv), which memcheck sees through an interior pointer: possibly lost, 1 block.
# Args: MEMCHECK_SUMMARY LEAK_SHAPES
set -euo pipefail
summary=$(readlink -f "$1"); prog=$(readlink -f "$2")
command -v valgrind >/dev/null || { echo "FAIL: valgrind is not installed"; exit 1; }
work=${TEST_TMPDIR:-$(mktemp -d)}/leak_shapes
mkdir -p "$work"
/usr/bin/python3 "$summary" -- "$prog" none > "$work/none.json"
fail=0
# mode  definite(blocks bytes)  indirect  possible  reachable  errors; "?" bytes: not checked
check() {
  local mode=$1; shift
  /usr/bin/python3 "$summary" -- "$prog" "$mode" > "$work/$mode.json" || { echo "FAIL: $mode: no summary"; fail=1; return; }
  /usr/bin/python3 - "$work/none.json" "$work/$mode.json" "$mode" "$@" <<'PY' || fail=1
import json, sys
base, got, mode = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), sys.argv[3]
want = sys.argv[4:]
kinds = ["definitely_lost", "indirectly_lost", "possibly_lost", "still_reachable"]
bad = []
for i, k in enumerate(kinds):
    blocks = got[k]["blocks"] - base[k]["blocks"]
    nbytes = got[k]["bytes"] - base[k]["bytes"]
    if blocks != int(want[2 * i]) or (want[2 * i + 1] != "?" and nbytes != int(want[2 * i + 1])):
        bad.append(f"{k}: {blocks} blocks, {nbytes} bytes; designed {want[2 * i]} blocks, {want[2 * i + 1]} bytes")
if got["errors"] - base["errors"] != int(want[8]):
    bad.append(f"errors: {got['errors'] - base['errors']}, designed {want[8]}")
for b in bad:
    print(f"FAIL: {mode}: {b}")
if not bad:
    print(f"ok: {mode}")
sys.exit(1 if bad else 0)
PY
}
#                      definite  indirect  possible  reachable  errors
check list             1 32      9 288     0 0       1 200      1
check cycle            1 48      3 144     0 0       0 0        1
check global           0 0       0 0       0 0       1 100      0
check interior         0 0       0 0       1 64      0 0        1
check mmap             0 0       0 0       0 0       1 80       0
check shared_mmap      0 0       0 0       0 0       1 80       0
check merged_mmap      0 0       0 0       0 0       2 1048656  0
check tls_mmap         0 0       0 0       0 0       1 80       0
check guard_page       0 0       0 0       0 0       3 20592    0
check dead_frame       1 72      0 0       0 0       0 0        1
check dead_frame_return 1 72     0 0       0 0       0 0        1
check arena_top        1 2664    0 0       0 0       0 0        1
check many_lost        1000 24000 0 0      0 0       4 160000   1
check thread_ended     5 200     0 0       1 ?       0 0        2
check thread_stale_stack 1 56    0 0       1 ?       0 0        2
check thread_blocked   0 0       0 0       1 ?       1 120      1
check interleaved      10 1348   0 0       0 0       0 0        1
check tree             1 32      6 192     0 0       0 0        1
check self_pointer     1 40      0 0       0 0       0 0        1
check pool_holds       2 64      2 1600    0 0       0 0        2
check data_global      0 0       0 0       0 0       1 88       0
check relro            1 40      0 0       0 0       0 0        1
check data_guard       1 80      0 0       0 0       1 72       1
check tls              0 0       0 0       0 0       1 56       0
check pthread_key      0 0       0 0       0 0       1 64       0
check unaligned        1 24      0 0       0 0       0 0        1
check malloc0          1 0       0 0       0 0       1 0        1
check swapcontext      0 0       0 0       0 0       2 65584    0
check exit_register    0 0       0 0       0 0       1 96       0
check thread_registers 0 0       0 0       1 ?       1 88       1
check dynamic_tls      0 0       0 0       0 0       8 ?        0
[ "$fail" = 0 ] || exit 1
echo PASS
