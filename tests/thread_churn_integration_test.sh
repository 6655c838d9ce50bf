#!/bin/bash
# thread_churn (200 short-lived threads, every entry point, cross-thread frees, frees after the
# allocating thread ended) bare, pool=0 and pool=1: same output (its checksum line), same status;
# one report per run, complete and balanced.
# Args: LIB CHECKER THREAD_CHURN
source "$(dirname "$0")/integration_lib.sh"
integration_init "$1" "$2"
prog=$(abspath "$3")
run_three thread_churn /dev/null -- "$prog" 5
grep -q 'corrupt=0 misaligned=0 nonzero_calloc=0 null=0$' "$WORK/thread_churn/bare/stdout" ||
  fail "the bare run itself reports a problem: $(cat "$WORK/thread_churn/bare/stdout")"
standard_checks thread_churn thread_churn
echo PASS
