#!/bin/bash
# memcheck below poolscope sees the program's logical allocations again (valgrind=1): on a program
# whose leaks are known from its source (3 blocks of 24 bytes, 2 of 48, 2 of 200),
# `valgrind --leak-check=full` with pooling on reports exactly those as definitely lost, as it does
# with pooling off. With valgrind=0 the pooled leaks hide inside pools: the one-to-one mapping loss
# the option repairs.
# valgrind replaces malloc in every object that defines it unless told otherwise, which would take
# poolscope out of the picture: --soname-synonyms=somalloc=nouserintercepts keeps it in.
# Args: LIB KNOWN_LEAKS
set -euo pipefail
lib=$(readlink -f "$1"); prog=$(readlink -f "$2")
work=${TEST_TMPDIR:-$(mktemp -d)}/valgrind_leaks
mkdir -p "$work"
command -v valgrind >/dev/null || { echo "FAIL: valgrind is not installed"; exit 1; }
expected="definitely lost: 568 bytes in 7 blocks"
run() {  # run OPTIONS LOG
  LD_PRELOAD="$lib" POOLSCOPE_OPTIONS="$1:quiet=1:report=$work/r.%p.json" \
    valgrind --soname-synonyms=somalloc=nouserintercepts --leak-check=full "$prog" > "$work/out" 2> "$2"
  grep -q '^known_leaks: checksum' "$work/out" || { echo "FAIL: the program did not run ($1)"; cat "$2"; exit 1; }
}
for options in pool=1 pool=0; do
  run "$options" "$work/vg.log"
  grep -q "$expected" "$work/vg.log" || { echo "FAIL: $options: expected '$expected'"; grep -E 'lost|reachable|ERROR' "$work/vg.log"; exit 1; }
  ! grep -qE 'Invalid (read|write)|uninitialised' "$work/vg.log" || { echo "FAIL: memcheck errors with $options"; grep -A5 -E 'Invalid|uninitialised' "$work/vg.log" | head -30; exit 1; }
done
# The pooled leaks are the program's: poolscope's library was really there (it wrote its report).
ls "$work"/r.*.json > /dev/null
run "pool=1:valgrind=0" "$work/vg0.log"
if grep -q "$expected" "$work/vg0.log"; then
  echo "FAIL: with valgrind=0 memcheck should not see the pooled blocks one by one"; exit 1
fi
echo PASS
