#!/bin/bash
# A program that ends with quick_exit() (tests/programs/quick_exit.c) still gets its report: the same
# stdout (its at_quick_exit handler's line) and exit status (7) as bare, one balanced report per run,
# and with track=1 the kept 4321-byte block among the leaks. Bare, pool=0 and pool=1.
# Args: LIB CHECKER QUICK_EXIT
set -euo pipefail
source "$(dirname "$0")/integration_lib.sh"
integration_init "$1" "$2"
prog=$(abspath "$3")
run_three quick_exit /dev/null -- "$prog"
[ "$(cat "$WORK/quick_exit/bare/status")" = 7 ] || fail "the bare run exited $(cat "$WORK/quick_exit/bare/status"), expected 7"
grep -q "handler ran" "$WORK/quick_exit/bare/stdout" || fail "the bare run's handler wrote nothing"
standard_checks quick_exit quick_exit
for pool in 0 1; do
  kept_block_stack quick_exit pool$pool 4321 >/dev/null
done
echo "PASS: quick_exit() leaves a report with the kept block (pool=0 and pool=1)"
