#!/bin/bash
# edge_cases (every bad-input case of the allocation API, docs/testing.md) bare, pool=0 and pool=1: the printed
# results (NULL or not, errno, alignment, contents kept, bad_alloc, nothrow nullptr, ...) are
# byte-identical to glibc's; one report per run, complete and balanced.
# Args: LIB CHECKER EDGE_CASES
source "$(dirname "$0")/integration_lib.sh"
integration_init "$1" "$2"
prog=$(abspath "$3")
run_three edge_cases /dev/null -- "$prog"
grep -q '^edge_cases: done$' "$WORK/edge_cases/bare/stdout" || fail "the bare run did not finish"
standard_checks edge_cases edge_cases
echo PASS
