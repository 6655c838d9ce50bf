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
run --config=asan //pool/... //report/... //interpose:options_test
run --config=tsan //pool/...

passed=$(grep -cE '^//[^ ]+ +(\(cached\) )?PASSED' "$log")
failed=$(grep -cE '^//[^ ]+ +.*(FAILED|TIMEOUT|NO STATUS|INCOMPLETE)' "$log")
if [ "$status" -ne 0 ] && [ "$failed" -eq 0 ]; then failed=1; fi  # a build failure counts
rm -f "$log"
echo "${passed} passed, ${failed} failed"
exit "$status"
