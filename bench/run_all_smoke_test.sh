#!/bin/bash
# The benchmark harness tested on itself (not a benchmark: no figure is checked): bench/run_all.sh in
# its quickest form (one size, one round, tiny workloads) must run every step and write the table;
# and a harness whose step fails (a loop binary that exits 1) must exit 1 and name the failure.
# Args: LIB ARTICLE_BENCH MALLOC_LOOP ARENA_LOOP
set -euo pipefail
export SKIP_BUILD=1 LIB=$1 BENCH=$2 LOOP=$3 ARENA_LOOP=$4
out=${TEST_TMPDIR:-$(mktemp -d)}/smoke
mkdir -p "$out"
run_all=$(dirname "$0")/run_all.sh

status=0
"$run_all" --quick --sizes=5 --reps=1 --memcheck-reps=1 --min-time=0.002 --scale=0.02 --callgrind-n=2000 \
  "$out/table.md" >"$out/stdout" 2>"$out/stderr" || status=$?
if [ "$status" -ne 0 ]; then
  cat "$out/stderr" "$out/stdout"
  echo "FAIL: run_all.sh --quick exited $status"
  exit 1
fi
for want in "## 1. malloc+free" "| malloc+free 5 B | 1 |" "| malloc+free 5 B | 2 |" "| arena int+20 B | 1 |" "| 2 empty calls (floor) | 1 |" \
  "## 2. Thread scaling" "## 3. Whole processes" "**python3**" "**sqlite3**" "**perl**" \
  "| heaptrack 1.4 (traced run only) |" "| valgrind memcheck --leak-check=full |" \
  "## 4. Instructions" "| malloc(5)+free |" "| arena round" "## 5. Targets" "- machine: " "- date: "; do
  grep -qF -- "$want" "$out/table.md" || { cat "$out/table.md"; echo "FAIL: the table lacks '$want'"; exit 1; }
done
if grep -q -e "## Failures" -e "| — |" -e "| failed |" "$out/table.md"; then
  cat "$out/table.md"
  echo "FAIL: a step failed or left a figure out"
  exit 1
fi
[ -s "$out/table.json" ] || { echo "FAIL: no table.json"; exit 1; }
grep -q "heaptrack counted [1-9][0-9]\{3,\} calls" "$out/table.md" || { echo "FAIL: heaptrack traced nothing"; exit 1; }

# A failing step must fail the harness.
status=0
LOOP=/bin/false "$run_all" --steps=callgrind --sizes=5 --callgrind-n=10 "$out/broken.md" >"$out/broken.stdout" \
  2>"$out/broken.stderr" || status=$?
if [ "$status" -ne 1 ] || ! grep -q "## Failures" "$out/broken.md"; then
  cat "$out/broken.stderr"
  echo "FAIL: a failing step gave exit status $status, not 1, or no Failures section"
  exit 1
fi
cat "$out/table.md"
echo PASS
