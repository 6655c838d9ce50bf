#!/bin/bash
# Threads resizing real blocks in one glibc arena with no thread cache (tests/programs/realloc_race.c):
# a block that realloc moves frees its old address inside glibc, and another thread may be handed it
# at once. Its record must leave the live table before that, as a free's does, or the other thread's
# record of the address is the one erased: the timeline's last point (per-thread recorded and freed
# bytes) then no longer equals the ledger's live bytes (the live table), an identity check_report.py
# checks. Six runs each with pooling on and off (the race shows in about half of the runs with the
# record erased after the realloc). Each run also matches the bare run.
# Args: LIB CHECKER REALLOC_RACE
set -euo pipefail
source "$(dirname "$0")/integration_lib.sh"
integration_init "$1" "$2"
prog=$(abspath "$3")
tunables=GLIBC_TUNABLES=glibc.malloc.tcache_count=0:glibc.malloc.arena_max=1
run_with_options race bare - /dev/null "$tunables" -- "$prog" 2000000 4
for opts in pool=1:track=1 pool=0:track=1; do
  for round in 1 2 3 4 5 6; do
    mode=${opts//[=:]/_}_$round
    run_with_options race "$mode" "$opts:quiet=1:report=@REPORT@" /dev/null "$tunables" -- "$prog" 2000000 4
    same_as_bare race "$mode"
    reports_ok race "$mode" "${opts:5:1}"
  done
done
echo "PASS: reallocs of real blocks racing with other threads keep the live table and the byte counts equal"
