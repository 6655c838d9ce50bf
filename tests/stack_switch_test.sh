#!/bin/bash
# A stack id is given again only for the stack it was made for. tests/programs/stack_switch.c makes
# 64 new stacks in a row on one thread (a run on which the per-thread walk memo does not pay, so the
# next 1,024 captures go without it), 1,024 allocations from one other site, then the 64th stack again
# and keeps that block. The report must put the kept block on f77/g77, not on the site seen last.
# Bare, pool=0 and pool=1 (integration_lib.sh: same output and status, complete balanced reports).
# Args: LIB CHECKER STACK_SWITCH
set -euo pipefail
source "$(dirname "$0")/integration_lib.sh"
integration_init "$1" "$2"
prog=$(abspath "$3")
run_three stack_switch /dev/null -- "$prog"
standard_checks stack_switch stack_switch
for pool in 0 1; do
  stack=$(kept_block_stack stack_switch pool$pool 1077)
  [ "$(head -2 <<<"$stack" | tr '\n' ' ')" = "f77 g77 " ] || fail "stack_switch/pool$pool: the kept block's stack: $stack"
  "$PY" - "$WORK"/stack_switch/pool$pool/reports/r.*.json <<'PY' || fail "stack_switch/pool$pool: a leak on the filler site"
import json, sys
r = json.load(open(sys.argv[1]))
assert not [g for g in r["leaks"] if any(f["function"] == "filler" for f in g["stack"])], r["leaks"]
PY
done
echo "PASS: the kept block is on its own stack (pool=1 and pool=0)"
