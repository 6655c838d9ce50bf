#!/bin/bash
# GCC's C++ compiler proper (cc1plus), compiling tests/workloads/compile_me.cc at -O1, bare, pool=0
# and pool=1: the same assembly on stdout, the same stderr and exit status; one report per run,
# complete and balanced. cc1plus grows, shrinks and frees many small blocks in every order, so tracked
# tail frees that left a stale start mark inside a later block would show here.
# Args: LIB CHECKER SOURCE
source "$(dirname "$0")/integration_lib.sh"
integration_init "$1" "$2"
source_file=$(abspath "$3")
cc1plus=$(g++ -print-prog-name=cc1plus)
[ -x "$cc1plus" ] || fail "no cc1plus (g++ -print-prog-name=cc1plus said '$cc1plus')"
# Preprocessed once, bare, so that every run compiles the same bytes in one process.
g++ -std=c++17 -E -o "$WORK/compile_me.ii" "$source_file" || fail "g++ -E failed"
run_three gcc /dev/null -- "$cc1plus" -fpreprocessed -quiet -O1 -std=c++17 "$WORK/compile_me.ii" -o -
[ "$(cat "$WORK/gcc/bare/status")" = 0 ] || fail "the bare cc1plus run exited $(cat "$WORK/gcc/bare/status")"
grep -q "^main:" "$WORK/gcc/bare/stdout" || fail "the bare run wrote no assembly for main"
standard_checks gcc 'cc1plus'
echo PASS
