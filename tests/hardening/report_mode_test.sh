#!/bin/bash
# Reports are mode 0600 whatever the umask, also when they replace an existing file of another mode,
# and snapshot reports too (docs/report-schema.md: mode 0600).
# Args: LIB CHECKER STRESS PLUGIN

source "$(dirname "$0")/hardening_lib.sh"
integration_init "$1" "$2"
prog=$(abspath "$3")
D=$WORK/mode
rm -rf "$D"
mkdir -p "$D"
for mask in 000 022 077; do
  (umask "$mask" && cd "$D" && timeout 60 env LD_PRELOAD="$LIB" POOLSCOPE_OPTIONS="quiet=1:report=$D/u$mask.json" "$prog" hello 0 >/dev/null) ||
    fail "umask $mask: the run failed"
  m=$(stat -c %a "$D/u$mask.json")
  [ "$m" = 600 ] || fail "umask $mask: the report has mode $m, expected 600"
  note "umask $mask: mode $m"
done
printf '{}' >"$D/existing.json"
chmod 644 "$D/existing.json"
(cd "$D" && timeout 60 env LD_PRELOAD="$LIB" POOLSCOPE_OPTIONS="quiet=1:report=$D/existing.json" "$prog" hello 0 >/dev/null) ||
  fail "existing: the run failed"
m=$(stat -c %a "$D/existing.json")
[ "$m" = 600 ] || fail "an existing 0644 file at the report path: the report has mode $m, expected 600"
check_reports "$D/existing.json"
(umask 000 && cd "$D" && exec timeout -s KILL 3 env LD_PRELOAD="$LIB" \
   POOLSCOPE_OPTIONS="quiet=1:snapshot_interval=1:report=$D/snap.json" "$prog" spin 60000 >/dev/null) || true
[ -f "$D/snap.json" ] || fail "no snapshot report after 3 s with snapshot_interval=1"
m=$(stat -c %a "$D/snap.json")
[ "$m" = 600 ] || fail "snapshot report: mode $m, expected 600"
note "existing file and snapshot report: mode 600"
echo PASS
