#!/bin/bash
# Allocations inside a signal handler (tests/programs/signal_alloc.c): the stack walk from the
# allocating frame meets the kernel's signal frame, which only the fallback unwinder reads. The process
# must finish (a capture that cannot go on from the program's frame must not loop forever: each run
# has 20 s), show what it shows bare, and the report must put the kept 777-byte block on on_signal with
# the frames above the signal frame (raise, deep_caller) in its stack. Bare, pool=0 and pool=1.
# Args: LIB CHECKER SIGNAL_ALLOC
set -euo pipefail
POOLSCOPE_RUN_TIMEOUT=20
source "$(dirname "$0")/integration_lib.sh"
integration_init "$1" "$2"
prog=$(abspath "$3")
run_three signal_alloc /dev/null -- "$prog"
standard_checks signal_alloc signal_alloc
for pool in 0 1; do
  stack=$(kept_block_stack signal_alloc pool$pool 777)
  [ "$(head -1 <<<"$stack")" = on_signal ] || fail "signal_alloc/pool$pool: innermost frame: $stack"
  grep -qx raise <<<"$stack" && grep -qx deep_caller <<<"$stack" ||
    fail "signal_alloc/pool$pool: the stack stops at the signal frame: $stack"
done
echo "PASS: allocations in a signal handler are recorded through the signal frame (pool=1 and pool=0)"
