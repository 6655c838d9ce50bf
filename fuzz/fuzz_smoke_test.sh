#!/bin/bash
# Builds every libFuzzer target with clang++ and runs each for a few seconds (5 s; 60 s with
# POOLSCOPE_HARDENING_LONG=1) over its seed corpus, regression inputs included: a crash fails.
set -u
secs=5
[ "${POOLSCOPE_HARDENING_LONG:-0}" = 1 ] && secs=60
export FUZZ_OUT=${TEST_TMPDIR:-$(mktemp -d)}/fuzz
# The library sources are not declared inputs (see BUILD): run the script from the workspace the
# runfiles symlinks point into, where interpose/, pool/ and report/ are.
script=$(readlink -f "$(dirname "$0")/run_fuzzers.sh")
[ -f "$(dirname "$script")/../pool/pool.cc" ] || { echo "FAIL: cannot find the workspace from $script" >&2; exit 1; }
exec "$script" "$secs"
