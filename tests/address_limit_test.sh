#!/bin/bash
# Under an address-space limit (ulimit -v 40960: 40 MiB) poolscope cannot reserve its pool map (a
# leaf is 32 MiB of address space), so it must give up pooling once and say so: the program
# (alloc_fuzz, one thread, 200,000 operations) prints what it prints bare under the same limit, stderr
# holds one warning line besides the report line, and the report balances with no pool made and the
# pooled-size requests counted as `disabled` misses, not each one trying the reservation again (a
# failing mmap each, which makes python3 about 20 times slower).
# Tracking on and off (tracking may find no room either; then a warning of its own says so); each run
# must count its requests as the same run without the limit does (too_large the same, the rest
# disabled instead of hits). Args: LIB CHECKER ALLOC_FUZZ
set -euo pipefail
source "$(dirname "$0")/integration_lib.sh"
integration_init "$1" "$2"
prog=$(abspath "$3")
limited=(bash -c 'ulimit -v 40960 && exec "$0" "$@"' "$prog" 1 200000 1)
run_with_options address_limit bare - /dev/null -- "${limited[@]}"
[ "$(cat "$WORK/address_limit/bare/status")" = 0 ] || fail "address_limit: the bare run failed under the limit"
for mode in tracked untracked; do
  track=1
  [ "$mode" = untracked ] && track=0
  run_with_options address_limit "$mode" "track=$track:quiet=0:report=@REPORT@" /dev/null -- "${limited[@]}"
  dir=$WORK/address_limit/$mode
  cmp -s "$WORK/address_limit/bare/stdout" "$dir/stdout" || fail "address_limit/$mode: stdout differs from the bare run"
  [ "$(cat "$dir/status")" = 0 ] || fail "address_limit/$mode: exit status $(cat "$dir/status")"
  warnings=$(grep -c '^poolscope: warning: no memory for the pool map' "$dir/stderr" || true)
  [ "$warnings" = 1 ] || { cat "$dir/stderr" >&2; fail "address_limit/$mode: $warnings warning lines about the pool map, expected 1"; }
  # Tracking may find no room either (its reservations depend on what else the process maps): then
  # one more warning says so, and the report says tracked: false.
  others=$( (grep -v -e '^poolscope: warning: no memory for the pool map' -e '^poolscope: report written to ' \
    -e '^poolscope: warning: no memory for leak tracking' -e '^poolscope: warning: [0-9]* allocations\{0,1\} could not be recorded' \
    "$dir/stderr" || true) | wc -l)
  [ "$others" = 0 ] || { cat "$dir/stderr" >&2; fail "address_limit/$mode: other lines on stderr"; }
  for w in 'no memory for leak tracking' 'could not be recorded'; do
    [ "$(grep -c "$w" "$dir/stderr" || true)" -le 1 ] || fail "address_limit/$mode: '$w' said more than once"
  done
  reports_ok address_limit "$mode" 1
  "$PY" - "$dir"/reports/r.*.json <<'PY' || fail "address_limit/$mode: the report"
import json, sys
r = json.load(open(sys.argv[1]))
p = r["pool"]
assert p["enabled"] is True, p
# The one attempt that found no room: its real block went back at once (a pool made and released).
assert p["pools_created"] <= 1 and p["pools_created"] == p["pools_released"] and p["hits"] == 0, \
    "pools made under the limit: %r" % p
assert p["misses"]["disabled"] > 10000, "pooled-size requests not counted as disabled: %r" % p["misses"]
assert p["misses"]["pool_full"] == 0, "the failed attempt counted as pool_full: %r" % p["misses"]
assert r["reconciliation"]["balanced"] is True
PY
done
# The program is deterministic, so its requests are the same with and without the limit: each one the
# pool took (a hit) or tried (pool_full) without the limit is a `disabled` miss under it, and every
# other miss keeps its reason (the inline regular path too: it must not count every request as
# too_large).
for mode in tracked untracked; do
  track=1
  [ "$mode" = untracked ] && track=0
  run_with_options address_limit "$mode-free" "track=$track:quiet=1:report=@REPORT@" /dev/null -- "$prog" 1 200000 1
  "$PY" - "$WORK/address_limit/$mode"/reports/r.*.json "$WORK/address_limit/$mode-free"/reports/r.*.json <<'PY' ||
import json, sys
limited, free = (json.load(open(f))["pool"] for f in sys.argv[1:3])
lm, fm = limited["misses"], free["misses"]
expected = dict(fm, disabled=fm["disabled"] + free["hits"] + fm["pool_full"], pool_full=0)
assert lm == expected, "misses under the limit %r, expected %r (from the run without it: %r, %d hits)" % (
    lm, expected, fm, free["hits"])
PY
    fail "address_limit/$mode: the misses under the limit do not match the run without it"
done
echo "PASS: under a 96 MiB address-space limit pooling gives up once, says so once, and the program runs as bare"
