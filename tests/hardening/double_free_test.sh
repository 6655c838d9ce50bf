#!/bin/bash
# A double free whose first free came from another thread (see double_free.cc): with pool=1 (and
# track=1 and track=0) the live neighbour keeps its contents and is not handed out again, and the
# report counts exactly one double free and passes `poolscope check`.
# Args: LIB CHECKER DOUBLE_FREE
source "$(dirname "$0")/hardening_lib.sh"
integration_init "$1" "$2"
prog=$(abspath "$3")
failures=0
for track in 1 0; do
  name=double_free_track$track
  run_with_options "$name" pool1 "pool=1:quiet=1:track=$track:report=@REPORT@" /dev/null -- "$prog"
  d=$WORK/$name/pool1
  sed "s/^/  $name: /" "$d/stdout"
  r=$(ls "$d/reports/"r.*.json 2>/dev/null | head -1)
  if [ -z "$r" ]; then echo "FAIL: $name: no report" >&2; failures=$((failures + 1)); continue; fi
  doubles=$(json_get "$r" 'r["errors"]["double_frees"]')
  note "$name: exit $(cat "$d/status"), errors.double_frees = $doubles"
  [ "$(cat "$d/status")" = 0 ] || { echo "FAIL: $name: the double free changed a live block (stdout above)" >&2; failures=$((failures + 1)); }
  [ "$doubles" = 1 ] || { echo "FAIL: $name: errors.double_frees = $doubles, expected 1" >&2; failures=$((failures + 1)); }
  "$POOLSCOPE" check "$r" >&2 || { echo "FAIL: $name: poolscope check rejected the report" >&2; failures=$((failures + 1)); }
done
[ "$failures" = 0 ] || fail "$failures check(s) failed (above)"
echo PASS
