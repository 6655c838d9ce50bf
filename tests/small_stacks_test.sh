#!/bin/bash
# Threads made with PTHREAD_STACK_MIN stacks (16 KiB, out of which glibc also takes each thread's
# static TLS) that use 4 KiB of their stack and then allocate (tests/programs/small_stacks.c). glibc
# takes a preloaded library's thread-local storage out of every thread's stack, so poolscope must keep
# its own small and leave such threads room for their work and for its tracked malloc (with 8.8 KiB
# of TLS every such thread would crash on its first call). Bare, pool=0, pool=1 with tracking and
# pool=1 without it (the inline paths) must all print what the bare run prints; with tracking, the
# report puts the four kept 100-byte blocks on `worker`. Then the last thread ends the process itself
# with exit(3): the report, written at exit (it needs a 24 KiB thread), must be written all the same
# (on a stack of poolscope's own), and the status stay 3, not a SIGSEGV.
# Args: LIB CHECKER SMALL_STACKS
set -euo pipefail
source "$(dirname "$0")/integration_lib.sh"
integration_init "$1" "$2"
prog=$(abspath "$3")
run_three small_stacks /dev/null -- "$prog" 4096
[ "$(cat "$WORK/small_stacks/bare/status")" = 0 ] ||
  fail "small_stacks: the bare run itself failed (status $(cat "$WORK/small_stacks/bare/status")): the premise of this test does not hold here"
standard_checks small_stacks small_stacks
run_with_options small_stacks untracked "track=0:quiet=1:report=@REPORT@" /dev/null -- "$prog" 4096
same_as_bare small_stacks untracked
reports_ok small_stacks untracked 1
run_three small_stacks_exit /dev/null -- "$prog" 4096 exit
[ "$(cat "$WORK/small_stacks_exit/bare/status")" = 3 ] ||
  fail "small_stacks_exit: the bare run ended with status $(cat "$WORK/small_stacks_exit/bare/status"), not 3"
standard_checks small_stacks_exit small_stacks
for run in small_stacks/pool0 small_stacks/pool1 small_stacks_exit/pool0 small_stacks_exit/pool1; do
  "$PY" - "$WORK/$run"/reports/r.*.json <<'PY' || fail "$run: the kept blocks"
import json, sys
r = json.load(open(sys.argv[1]))
groups = [g for g in r["leaks"] if g["stack"] and g["stack"][0]["function"] == "worker"]
# One group per kind (main's copies of the pointers are gone once it returns, except what a register
# or a dead frame may still hold): 4 blocks of 100 bytes over them.
assert 1 <= len(groups) <= 2, "groups allocated in worker: %r" % groups
blocks, nbytes = sum(g["blocks"] for g in groups), sum(g["bytes"] for g in groups)
assert (blocks, nbytes) == (4, 400), "worker's groups: %d blocks, %d bytes" % (blocks, nbytes)
PY
done
echo "PASS: threads with PTHREAD_STACK_MIN stacks run as they do bare (pool=0, pool=1, track=0), and their leaks are named, also when one of them ends the process"
