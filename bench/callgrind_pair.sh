#!/bin/bash
# Instructions per malloc(5)+free pair, counted by callgrind (PERF.md: the same on every run,
# whatever else the machine does): X(N) = instructions of `malloc_loop N`, and per pair
# (X(2N) - X(N)) / N, which cancels start-up, exit and report writing.
#
#   bench/callgrind_pair.sh                 N=200000, size 5; bare, pass-through and pooled
#   N=100000 SIZE=20 bench/callgrind_pair.sh
#   bench/callgrind_pair.sh 'pool=1:pool_size=128:track=0:valgrind=0'   extra configurations
#   SKIP_BUILD=1 LIB=... LOOP=... bench/callgrind_pair.sh
#
# Configurations: bare; pass-through = pool=0 track=0 valgrind=0; pooled = pool=1 track=0
# valgrind=0 (valgrind=0: no memcheck client requests, which callgrind would count); then every
# argument as one more POOLSCOPE_OPTIONS string. quiet=1 and report=none are appended to each.
set -euo pipefail

cd "$(dirname "$0")/.."
N=${N:-200000}
SIZE=${SIZE:-5}
if [ -z "${SKIP_BUILD:-}" ]; then
  bazel build -c opt //interpose:libpoolscope.so //bench:malloc_loop >&2
  BIN=$(bazel info -c opt bazel-bin 2>/dev/null)
  LIB=${LIB:-$BIN/interpose/libpoolscope.so}
  LOOP=${LOOP:-$BIN/bench/malloc_loop}
fi
: "${LIB:?set LIB to libpoolscope.so}" "${LOOP:?set LOOP to malloc_loop}"
LIB=$(readlink -f "$LIB")

collected() {  # collected OPTIONS|- COUNT: the "Collected : X" of one callgrind run
  local options=$1 count=$2 log
  local -a env_args=(-u LD_PRELOAD -u POOLSCOPE_OPTIONS)
  [ "$options" = - ] || env_args=(LD_PRELOAD="$LIB" POOLSCOPE_OPTIONS="$options:quiet=1:report=none")
  log=$(env "${env_args[@]}" valgrind --tool=callgrind --callgrind-out-file=/dev/null "$LOOP" "$count" "$SIZE" 2>&1) || {
    echo "$log" >&2
    echo "callgrind_pair.sh: the run failed (options: $options)" >&2
    return 1
  }
  echo "$log" | sed -n 's/^==[0-9]*== Collected : \([0-9]*\)$/\1/p'
}

per_pair() {  # per_pair LABEL OPTIONS|-
  local label=$1 options=$2 x1 x2
  x1=$(collected "$options" "$N")
  x2=$(collected "$options" "$((2 * N))")
  [ -n "$x1" ] && [ -n "$x2" ] || { echo "no 'Collected' line for $label" >&2; return 1; }
  /usr/bin/python3 -c 'import sys; l, o, a, b, n = sys.argv[1:]; n = int(n)
print("%-12s %-40s X(N)=%-12s X(2N)=%-12s per pair: %.1f" % (l, o, a, b, (int(b) - int(a)) / n))' \
    "$label" "$options" "$x1" "$x2" "$N"
}

echo "malloc($SIZE)+free pairs, N=$N; library $LIB"
per_pair bare -
per_pair passthrough "pool=0:track=0:valgrind=0"
per_pair pooled "pool=1:track=0:valgrind=0"
i=0
for extra in "$@"; do
  i=$((i + 1))
  per_pair "extra$i" "$extra"
done
