#!/bin/bash
# The malloc family called with the stack 8 bytes off the ABI's 16-byte alignment (hand-written
# assembly does it, and glibc copes): the process must run as bare with pooling off and on, tracked
# (the stack capture's code keeps 16-byte values on the stack) and not, and the kept 4,321-byte block
# be in the report. A library built assuming the alignment died of SIGSEGV on a movaps.
# Args: LIB CHECKER MISALIGNED_STACK
set -euo pipefail
source "$(dirname "$0")/integration_lib.sh"
integration_init "$1" "$2"
prog=$(abspath "$3")
run_three misaligned /dev/null -- "$prog"
standard_checks misaligned misaligned_stack
run_with_options misaligned untracked "pool=1:track=0:quiet=1:report=@REPORT@" /dev/null -- "$prog"
same_as_bare misaligned untracked
for mode in pool0 pool1; do
  stack=$(kept_block_stack misaligned "$mode" 4321)
  grep -qx main <<<"$stack" || fail "misaligned/$mode: the kept block's stack: $stack"
done
echo "PASS: the malloc family from a misaligned stack, tracked and not, pooling off and on"
