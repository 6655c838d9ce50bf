#!/bin/bash
# File: tests/tools/suppressions_tools_test.sh
#
# The suppression files that `poolscope suppressions` writes, checked with the real tools:
# valgrind parses the valgrind file and, for a program that preloads a library named
# libpoolscope.so which leaks one block, turns the "definitely lost" leak into a suppressed one;
# heaptrack_print accepts the heaptrack file without an "invalid suppression line".
set -u
POOLSCOPE="$PWD/tools/poolscope"
FAKE="$PWD/tests/tools/fake/libpoolscope.so"
REPORT="$PWD/tests/testdata/report_on.json"
T="$(mktemp -d "${TEST_TMPDIR:-/tmp}/supp_test.XXXXXX")"
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
for tool in valgrind heaptrack heaptrack_print; do
  command -v "$tool" >/dev/null || { echo "FAIL: $tool is not installed" >&2; exit 1; }
done

"$POOLSCOPE" suppressions --format=valgrind "$REPORT" >"$T/vg.supp" || fail "suppressions valgrind"
"$POOLSCOPE" suppressions --format=heaptrack "$REPORT" >"$T/ht.supp" || fail "suppressions heaptrack"
"$POOLSCOPE" suppressions --format=lsan "$REPORT" >"$T/lsan.supp" || fail "suppressions lsan"
grep -qx 'leak:poolscope_pool_alloc' "$T/lsan.supp" || fail "lsan file: $(cat "$T/lsan.supp")"

# valgrind: without the file the fake's block is definitely lost; with it, suppressed.
mkdir "$T/lib" && cp "$FAKE" "$T/lib/libpoolscope.so"
LD_PRELOAD="$T/lib/libpoolscope.so" valgrind --leak-check=full --show-leak-kinds=all \
  /bin/true >"$T/vg0.log" 2>&1
grep -q 'definitely lost: 248 bytes in 2 blocks' "$T/vg0.log" || fail "the fake leaks were not seen: $(grep -E 'lost|ERROR' "$T/vg0.log")"
LD_PRELOAD="$T/lib/libpoolscope.so" valgrind --leak-check=full --show-leak-kinds=all \
  --suppressions="$T/vg.supp" /bin/true >"$T/vg1.log" 2>&1
# Only the pool's block is suppressed: the program's own 200-byte leak is still definitely lost.
grep -q 'definitely lost: 200 bytes in 1 blocks' "$T/vg1.log" || fail "valgrind suppressed too much or too little: $(grep -E 'lost|suppressed|supp' "$T/vg1.log")"
grep -q 'suppressed: 48 bytes in 1 blocks' "$T/vg1.log" || fail "the pool was not suppressed: $(grep -E 'suppressed' "$T/vg1.log")"

# heaptrack: record /bin/true, then print with the file.
(cd "$T" && heaptrack -o "$T/trace" /bin/true >/dev/null 2>&1)
trace="$(ls "$T"/trace* 2>/dev/null | head -1)"
[ -n "$trace" ] || fail "heaptrack recorded nothing"
if [ -n "$trace" ]; then
  heaptrack_print --suppressions "$T/ht.supp" "$trace" >"$T/ht.log" 2>&1 || fail "heaptrack_print failed"
  ! grep -q 'invalid suppression' "$T/ht.log" || fail "heaptrack_print: $(grep 'invalid suppression' "$T/ht.log")"
fi

rm -rf "$T"
if [ "$failures" -ne 0 ]; then
  echo "0 passed, $failures failed"
  exit 1
fi
echo "suppressions_tools_test: all checks passed"
