#!/bin/bash
# bench/interleave.py tested on itself (no figure is checked): it reports every configuration (time,
# CPU time, peak RSS, faults) and the added-time share against the reference; a failing round stops it with a
# nonzero status and names the configuration; --ratios prints a line of ratios per configuration; a
# configuration without a name or with a word that is not KEY=VALUE is refused.
set -uo pipefail
tool=$(dirname "$0")/interleave.py
out=$(/usr/bin/python3 "$tool" --rounds 2 --reference ref --config 'ref FOO=1' --config 'other FOO=2 BAR=3' \
  -- /bin/sh -c 'test -n "${FOO:-}" || test -z "${BAR:-}"')
[ $? -eq 0 ] || { echo "FAIL: a run of true exited nonzero: $out"; exit 1; }
for want in "2 rounds of: /bin/sh" "bare " "ref " "other " "% of ref's" "cpu " "peak RSS" "faults"; do
  grep -qF -- "$want" <<<"$out" || { echo "$out"; echo "FAIL: the report lacks '$want'"; exit 1; }
done
grep -q "^ref .*% of ref's" <<<"$out" && { echo "$out"; echo "FAIL: the reference compared to itself"; exit 1; }
# The environment reaches the command: BAR set without FOO fails the check above, so this one fails.
err=$(/usr/bin/python3 "$tool" --rounds 1 --config 'broken BAR=1' -- /bin/sh -c 'test -n "${FOO:-}" || test -z "${BAR:-}"' 2>&1)
status=$?
[ $status -ne 0 ] && grep -q "broken exited with status 1" <<<"$err" || { echo "$err"; echo "FAIL: a failing round was not reported (status $status)"; exit 1; }
# WRAP= puts a command in front of the measured one, for that configuration only.
# (the wrapped configuration sets FOO, so its run passes only if the wrapper set WRAPPED)
out=$(/usr/bin/python3 "$tool" --rounds 1 --cpu all --config 'wrapped FOO=1 WRAP=/usr/bin/env,WRAPPED=1' \
  -- /bin/sh -c 'test "${WRAPPED:-0}" = 1 || test -z "${FOO:-}"')
[ $? -eq 0 ] && grep -q "^wrapped " <<<"$out" && grep -qF "(not pinned)" <<<"$out" || { echo "$out"; echo "FAIL: WRAP= or --cpu all"; exit 1; }
err=$(/usr/bin/python3 "$tool" --rounds 1 --config 'wrapped WRAP=/bin/false' -- /bin/true 2>&1)
[ $? -ne 0 ] && grep -q "wrapped exited with status 1" <<<"$err" || { echo "$err"; echo "FAIL: the WRAP command did not run"; exit 1; }
# --ratios: one line per configuration but bare, the reference's own time ratio to itself 1.00x.
out=$(/usr/bin/python3 "$tool" --rounds 1 --ratios --reference ref --config 'ref FOO=1' --config 'other FOO=2' -- /bin/true)
grep -q "^ratios of medians .*time / bare .*RSS / bare .*time / ref .*RSS / ref" <<<"$out" &&
  grep -q "^ref  *[0-9.]*x  *[0-9.]*x  *1\.00x  *1\.00x$" <<<"$out" &&
  grep -q "^other  *[0-9.]*x  *[0-9.]*x  *[0-9.]*x  *[0-9.]*x$" <<<"$out" &&
  ! grep -q "^bare  *[0-9.]*x" <<<"$out" || { echo "$out"; echo "FAIL: --ratios"; exit 1; }
for bad in 'KEY=1' 'name KEY'; do
  /usr/bin/python3 "$tool" --config "$bad" -- true >/dev/null 2>&1 && { echo "FAIL: --config '$bad' accepted"; exit 1; }
done
echo "PASS"
