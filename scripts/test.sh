#!/usr/bin/env bash
# Sets up the machine and runs every test: `bazel test //...`, then the sanitizer configurations on the
# libraries that have no preload magic in them. Ends with the line "N passed, N failed", counted from
# Bazel's own test summary.
set -uo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh || exit 1

log=$(mktemp)
status=0
run() {
  echo "+ bazel test $*" >&2
  bazel test "$@" 2>&1 | tee -a "$log" | grep -E '^//|Executed|FAIL|ERROR' >&2
  local rc=${PIPESTATUS[0]}
  [ "$rc" -eq 0 ] || status=1
}

run //...
run --config=asan //pool/... //report/... //track/... //interpose:options_test //interpose:caller_tag_test \
  //interpose:internal_test //interpose:timeline_series_test //interpose:timeline_peak_test //interpose:owned_set_test \
  //interpose:scan_memory_test //interpose:glibc_arena_test //tests/tools:check_test //tests/tools:cli_test //tests/tools:render_test \
  //tests/tools:report_model_test
run --config=tsan //pool/... //track/...

# Bazel's own summary line, one per invocation: "Executed 3 out of 16 tests: 14 tests pass and 2 fail
# locally." (every test of the invocation, cached ones included, is counted in it).
passed=0
failed=0
while IFS= read -r line; do
  p=$(sed -n 's/.*: \([0-9][0-9]*\) tests\{0,1\} pass.*/\1/p' <<<"$line")
  f=$(sed -n 's/.* \([0-9][0-9]*\) fails\{0,1\}.*/\1/p' <<<"$line")
  passed=$((passed + ${p:-0}))
  failed=$((failed + ${f:-0}))
done < <(grep -E '^Executed [0-9]+ out of [0-9]+ tests?:' "$log")
if [ "$status" -ne 0 ] && [ "$failed" -eq 0 ]; then failed=1; fi  # a build failure counts
rm -f "$log"
echo "${passed} passed, ${failed} failed"
exit "$status"
