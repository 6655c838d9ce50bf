#!/bin/bash
# A thread's allocations after poolscope's thread-exit handler (tests/programs/late_thread_alloc.c: a
# pthread key destructor of the program's) are counted like any other. The program runs with 0 and 1
# late round; the reports must differ by exactly the late calls (4 threads x 25 rounds x 2 mallocs
# and 2 frees, half of them of a pooled size), with every combination of pool and track: the inline
# paths (track=0) and the recording ones. Each run also matches the bare run and its report balances.
# Args: LIB CHECKER LATE_THREAD_ALLOC
set -euo pipefail
source "$(dirname "$0")/integration_lib.sh"
integration_init "$1" "$2"
prog=$(abspath "$3")
expected=200  # kThreads * kRounds * 2
for late in 0 1; do
  run_with_options "late$late" bare - /dev/null -- "$prog" "$late"
  for opts in pool=0:track=0 pool=1:track=0 pool=0:track=1 pool=1:track=1; do
    mode=${opts//[=:]/_}
    run_with_options "late$late" "$mode" "$opts:quiet=1:report=@REPORT@" /dev/null -- "$prog" "$late"
    same_as_bare "late$late" "$mode"
    reports_ok "late$late" "$mode" "${opts:5:1}"
  done
done
for opts in pool=0:track=0 pool=1:track=0 pool=0:track=1 pool=1:track=1; do
  mode=${opts//[=:]/_}
  "$PY" - "$WORK"/late0/$mode/reports/r.*.json "$WORK"/late1/$mode/reports/r.*.json "$expected" "$opts" <<'PY' ||
import json, sys
a, b = (json.load(open(f))["logical"] for f in sys.argv[1:3])
expected, opts = int(sys.argv[3]), sys.argv[4]
for what in ("malloc", "free"):
    got = b["by_api"][what] - a["by_api"][what]
    assert got == expected, "%s: %d late %s calls counted, %d made" % (opts, got, what, expected)
assert b["allocs"] - a["allocs"] == expected, "%s: logical.allocs differ by %d" % (opts, b["allocs"] - a["allocs"])
PY
    fail "late_thread_alloc ($opts): the late allocations are not all counted"
done
echo "PASS: allocations after the thread-exit handler are counted (pool and track 0 and 1)"
