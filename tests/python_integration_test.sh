#!/bin/bash
# python3 (PYTHONMALLOC=malloc: every object through malloc) bare, pool=0 and pool=1: same stdout,
# stderr and exit status (3); one report per run, complete and balanced.
# Args: LIB CHECKER WORKLOAD.py
source "$(dirname "$0")/integration_lib.sh"
integration_init "$1" "$2"
workload=$(abspath "$3")
run_three python /dev/null PYTHONMALLOC=malloc PYTHONHASHSEED=0 -- /usr/bin/python3 "$workload"
[ "$(cat "$WORK/python/bare/status")" = 3 ] || fail "the bare python3 run exited $(cat "$WORK/python/bare/status"), expected 3"
standard_checks python 'python3*'
echo PASS
