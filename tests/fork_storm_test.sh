#!/bin/bash
# fork() at any moment of a multi-threaded program's allocation, poolscope's own work included (its
# timeline's samples, which a fork that copied one half taken left out of order): fork_storm forks
# children one after another while two threads allocate, with track=0 and with the defaults; every
# child's report, and the parent's, must pass `poolscope check`, and the program end as bare.
# Args: LIB CHECKER POOLSCOPE FORK_STORM
set -euo pipefail
source "$(dirname "$0")/integration_lib.sh"
integration_init "$1" "$2"
poolscope=$(abspath "$3")
prog=$(abspath "$4")
total=0
for options in track=0:2000 track=1:1000; do
  opts=${options%%:*} children=${options##*:}
  dir=$WORK/fork_storm/${opts//=/_}
  rm -rf "$dir"
  mkdir -p "$dir"
  POOLSCOPE_OPTIONS="$opts:quiet=1:report=$dir/r.%p.json" LD_PRELOAD="$LIB" "$prog" "$children" > "$dir/out" ||
    fail "$opts: fork_storm failed: $(cat "$dir/out")"
  grep -qx "children $children" "$dir/out" || fail "$opts: output: $(cat "$dir/out")"
  n=$(find "$dir" -name 'r.*.json' | wc -l)
  [ "$n" -eq $((children + 1)) ] || fail "$opts: $n reports for $children children and their parent"
  find "$dir" -name 'r.*.json' -print0 | xargs -0 -n 200 "$poolscope" check > "$dir/check" 2>&1 ||
    fail "$opts: reports fail their check: $(grep -v ': ok' "$dir/check" | head -5)"
  note "$opts: $n reports checked"
  total=$((total + n))
done
echo "PASS: $total reports of forked children and their parents pass poolscope check"
