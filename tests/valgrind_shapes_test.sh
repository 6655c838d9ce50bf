#!/bin/bash
# memcheck below poolscope with pools described to it (valgrind=1, the default) classifies the program's
# leaks as it does without poolscope: for each leak shape, definitely, indirectly and possibly lost
# blocks and bytes under poolscope equal the bare run's, with small pools (one block each) and large
# ones (many blocks each, so that memcheck must tell a pool's blocks apart). The pools themselves are
# left to still_reachable, which is not compared.
# A live or ended thread leaves glibc's dtv possibly lost; it holds one slot per loaded object, and
# poolscope loads objects of its own, so in those modes its bytes are not compared, its count is.
# Args: LIB LEAK_SHAPES MEMCHECK_SUMMARY
set -euo pipefail
lib=$(readlink -f "$1"); prog=$(readlink -f "$2"); summary=$(readlink -f "$3")
command -v valgrind >/dev/null || { echo "FAIL: valgrind is not installed"; exit 1; }
work=${TEST_TMPDIR:-$(mktemp -d)}/valgrind_shapes
mkdir -p "$work"
vg=(valgrind --soname-synonyms=somalloc=nouserintercepts --leak-check=full --leak-check-heuristics=none
    --run-libc-freeres=no --run-cxx-freeres=no)
failed=0
for mode in list cycle global interior mmap shared_mmap interleaved thread_ended thread_blocked tree self_pointer \
    tls unaligned malloc0 swapcontext exit_register thread_registers; do
  "${vg[@]}" "$prog" "$mode" > /dev/null 2> "$work/$mode.bare.log" || true
  /usr/bin/python3 "$summary" --log "$work/$mode.bare.log" > "$work/$mode.bare.json"
  for options in pool=1 pool=1:pool_size=256 pool=1:track=0:pool_size=1024; do
    log="$work/$mode.$options.log"
    LD_PRELOAD="$lib" POOLSCOPE_OPTIONS="$options:quiet=1:report=$work/r.%p.json" \
      "${vg[@]}" "$prog" "$mode" > /dev/null 2> "$log" || true
    /usr/bin/python3 "$summary" --log "$log" > "$work/$mode.$options.json"
    /usr/bin/python3 - "$work/$mode.bare.json" "$work/$mode.$options.json" "$mode ($options)" <<'PY' || failed=1
import json, sys
bare, got, name = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), sys.argv[3]
bad = []
for kind in ["definitely_lost", "indirectly_lost", "possibly_lost"]:
    fields = ["blocks"] if kind == "possibly_lost" and "thread" in name else ["blocks", "bytes"]
    for f in fields:
        if got[kind][f] != bare[kind][f]:
            bad.append(f"{kind}.{f} {got[kind][f]}, bare {bare[kind][f]}")
if bad:
    print(f"FAIL: {name}: " + "; ".join(bad))
    sys.exit(1)
print(f"ok: {name}: " + ", ".join(f"{k} {got[k]['blocks']}" for k in ["definitely_lost", "indirectly_lost", "possibly_lost"]))
PY
    grep -q "overlaps with block" "$log" && { echo "FAIL: $mode ($options): memcheck saw overlapping blocks"; failed=1; }
  done
done
# poolscope was really loaded below memcheck: it wrote its reports.
ls "$work"/r.*.json > /dev/null
[ "$failed" -eq 0 ] || exit 1
echo PASS
