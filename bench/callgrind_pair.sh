#!/bin/bash
# Instructions per malloc(5)+free pair, counted by callgrind (exact: the same on every run,
# whatever else the machine does): X(N) = instructions of `malloc_loop N`, and per pair
# (X(2N) - X(N)) / N, which cancels start-up, exit and report writing.
#
#   bench/callgrind_pair.sh                 N=200000, size 5; bare, pass-through and pooled
#   N=100000 SIZE=20 bench/callgrind_pair.sh
#   bench/callgrind_pair.sh 'pool=1:pool_size=128:track=0:valgrind=0'   extra configurations
#   SKIP_BUILD=1 LIB=... LOOP=... bench/callgrind_pair.sh
#   WHAT="arena rounds" LOOP=.../arena_loop SKIP_BUILD=1 LIB=... bench/callgrind_pair.sh   another loop
#   PEERS=1 bench/callgrind_pair.sh         also jemalloc, tcmalloc (minimal), mimalloc preloaded alone
#   PROFILE_DIR=DIR bench/callgrind_pair.sh keep each run's callgrind output as DIR/LABEL.N.out and
#                                           DIR/LABEL.2N.out (callgrind_annotate them; the difference
#                                           per function over N is that function's share of a pair)
#
# Configurations: bare; with PEERS=1 jemalloc, tcmalloc, mimalloc (LD_PRELOAD of Debian's library,
# no poolscope; a missing library fails the run); pass-through = pool=0 track=0 valgrind=0; pooled = pool=1 track=0
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

PEER_DIR=${PEER_DIR:-/usr/lib/x86_64-linux-gnu}
declare -A PEER_LIBS=(
  [jemalloc]=$PEER_DIR/libjemalloc.so.2
  [tcmalloc]=$PEER_DIR/libtcmalloc_minimal.so.4
  [mimalloc]=$PEER_DIR/libmimalloc.so.2
)

collected() {  # collected LABEL PRELOAD|- OPTIONS|- COUNT: the "Collected : X" of one callgrind run
  local label=$1 preload=$2 options=$3 count=$4 log out=/dev/null
  local -a env_args=(-u LD_PRELOAD -u POOLSCOPE_OPTIONS)
  if [ "$options" != - ]; then
    env_args=(LD_PRELOAD="$LIB" POOLSCOPE_OPTIONS="$options:quiet=1:report=none")
  elif [ "$preload" != - ]; then
    [ -e "$preload" ] || { echo "callgrind_pair.sh: $preload is missing (scripts/setup.sh installs it)" >&2; return 1; }
    env_args=(-u POOLSCOPE_OPTIONS LD_PRELOAD="$preload")
  fi
  if [ -n "${PROFILE_DIR:-}" ]; then
    mkdir -p "$PROFILE_DIR"
    out="$PROFILE_DIR/$label.$([ "$count" = "$N" ] && echo N || echo 2N).out"
  fi
  log=$(env "${env_args[@]}" valgrind --tool=callgrind --callgrind-out-file="$out" "$LOOP" "$count" "$SIZE" 2>&1) || {
    echo "$log" >&2
    echo "callgrind_pair.sh: the run failed ($label)" >&2
    return 1
  }
  echo "$log" | sed -n 's/^==[0-9]*== Collected : \([0-9]*\)$/\1/p'
}

per_pair() {  # per_pair LABEL OPTIONS|- [PRELOAD]
  local label=$1 options=$2 preload=${3:--} x1 x2 shown=$2
  [ "$preload" = - ] || shown="LD_PRELOAD=$(basename "$preload")"
  x1=$(collected "$label" "$preload" "$options" "$N")
  x2=$(collected "$label" "$preload" "$options" "$((2 * N))")
  [ -n "$x1" ] && [ -n "$x2" ] || { echo "no 'Collected' line for $label" >&2; return 1; }
  /usr/bin/python3 -c 'import sys; l, o, a, b, n = sys.argv[1:]; n = int(n)
print("%-12s %-40s X(N)=%-12s X(2N)=%-12s per pair: %.1f" % (l, o, a, b, (int(b) - int(a)) / n))' \
    "$label" "$shown" "$x1" "$x2" "$N"
}

echo "${WHAT:-malloc($SIZE)+free pairs}, N=$N; library $LIB"
per_pair bare -
if [ -n "${PEERS:-}" ]; then
  for peer in jemalloc tcmalloc mimalloc; do
    per_pair "$peer" - "${PEER_LIBS[$peer]}"
  done
fi
per_pair passthrough "pool=0:track=0:valgrind=0"
per_pair pooled "pool=1:track=0:valgrind=0"
i=0
for extra in "$@"; do
  i=$((i + 1))
  per_pair "extra$i" "$extra"
done
