#!/bin/bash
# dlopen_loop (dlopen / call / dlclose of libplugin.so, 60 times: the loader allocates and frees on
# each round, the plugin keeps a block live from its constructor to its destructor) bare, pool=0
# and pool=1: same output and status; one report per run, complete and balanced.
# Args: LIB CHECKER DLOPEN_LOOP LIBPLUGIN
source "$(dirname "$0")/integration_lib.sh"
integration_init "$1" "$2"
prog=$(abspath "$3")
plugin=$(abspath "$4")
run_three dlopen_loop /dev/null -- "$prog" "$plugin" 60
grep -q '^dlopen_loop loops=60 ' "$WORK/dlopen_loop/bare/stdout" || fail "the bare run failed: $(cat "$WORK/dlopen_loop/bare/stderr")"
standard_checks dlopen_loop dlopen_loop
echo PASS
