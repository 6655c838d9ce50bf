#!/bin/bash
# tests/programs/alloc_fuzz.c under poolscope: a deterministic random walk over the malloc family
# (every allocating call, realloc up and down, LIFO-heavy frees, hand-overs between threads) that
# checks contents, zeroing, alignment and malloc_usable_size itself and prints its failures (0) and a
# checksum. Each run must print what the bare run prints and exit as it does, and its report must
# balance: the defaults and pool=0 (run_three), then track=0, malloc_align=8, pool_size=256 and
# pools=1:pool_size=8, with one thread (two seeds) and with four.
# Args: LIB CHECKER ALLOC_FUZZ
set -euo pipefail
source "$(dirname "$0")/integration_lib.sh"
integration_init "$1" "$2"
prog=$(abspath "$3")
for args in "1 200000 1" "2 200000 1" "3 100000 4"; do
  name=fuzz${args// /_}
  # shellcheck disable=SC2086
  run_three "$name" /dev/null -- "$prog" $args
  grep -q " failures 0" "$WORK/$name/bare/stdout" || fail "$name: the bare run's own checks failed"
  for mode in pool0 pool1; do
    same_as_bare "$name" "$mode"
    reports_ok "$name" "$mode" "${mode#pool}"
  done
  for opts in track=0 malloc_align=8 pool_size=256 pools=1:pool_size=8; do
    mode=${opts//[=:]/_}
    # shellcheck disable=SC2086
    run_with_options "$name" "$mode" "$opts:quiet=1:report=@REPORT@" /dev/null -- "$prog" $args
    same_as_bare "$name" "$mode"
    reports_ok "$name" "$mode" 1
  done
done
echo "PASS: alloc_fuzz prints what it prints bare, with its own checks at 0, in every configuration"
