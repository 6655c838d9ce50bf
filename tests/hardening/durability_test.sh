#!/bin/bash
# Durability of the report (docs/report-schema.md, docs/cli.md):
#  1. snapshot_interval=1 and SIGKILL after ~2.5 s: a complete report of the last snapshot
#     (process.reason == "snapshot") that passes check_report.py; and snapshots taken while three
#     threads allocate pass `poolscope check` too (the identities hold in every report);
#  2. a report write that fails -- no folder, a path under a regular file (ENOTDIR), a read-only
#     mount (when this sandbox allows `unshare -m`), disk full (/dev/full always; a full 16 KiB tmpfs
#     when mount works) -- prints exactly one warning line on stderr; stdout and exit status are the
#     bare run's;
#  3. a symbolic link at the report path is not followed (its target is untouched, a dangling link's
#     target is not created; the report replaces the link);
#  4. a fifo at the report path is written to directly (read by a background cat) and stays a fifo;
#  5. bad options: one warning line each, the report's `options` shows the defaults used.
# Args: LIB CHECKER STRESS PLUGIN

source "$(dirname "$0")/hardening_lib.sh"
integration_init "$1" "$2"
prog=$(abspath "$3")
D=$WORK/durability
rm -rf "$D"
mkdir -p "$D"
failures=0
soft_fail() {  # records a failure, goes on with the next case; the test fails at the end
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}

# The host's own behaviour: stdout and status of `stress hello 7`, bare.
(cd "$D" && env -u LD_PRELOAD -u POOLSCOPE_OPTIONS "$prog" hello 7 >"$D/bare.out" 2>"$D/bare.err")
bare_status=$?
[ "$bare_status" = 7 ] || fail "the bare run exited $bare_status, expected 7"

# run_hello NAME OPTIONS: stress hello 7 preloaded; leaves $D/NAME.{out,err,status}.
run_hello() {
  local name=$1 opts=$2
  (cd "$D" && timeout -k 5 60 env LD_PRELOAD="$LIB" POOLSCOPE_OPTIONS="$opts" "$prog" hello 7 \
     >"$D/$name.out" 2>"$D/$name.err")
  echo $? >"$D/$name.status"
}
# host_unchanged NAME: stdout and status as bare.
host_unchanged() {
  local name=$1
  cmp -s "$D/bare.out" "$D/$name.out" || { soft_fail "$name: stdout differs from the bare run"; diff "$D/bare.out" "$D/$name.out" >&2; return 1; }
  [ "$(cat "$D/$name.status")" = "$bare_status" ] || { soft_fail "$name: exit status $(cat "$D/$name.status"), bare $bare_status"; return 1; }
  return 0
}
# failed_write NAME OPTIONS: host unchanged and exactly one warning line.
failed_write() {
  local name=$1 opts=$2
  run_hello "$name" "$opts"
  host_unchanged "$name" || return
  local n
  n=$(wc -l <"$D/$name.err")
  if [ "$n" != 1 ] || ! grep -q '^poolscope: warning: ' "$D/$name.err"; then
    soft_fail "$name: expected exactly one 'poolscope: warning:' line on stderr, got $n lines:"
    sed 's/^/  | /' "$D/$name.err" >&2
    return
  fi
  note "$name: ok: $(cat "$D/$name.err")"
}

# ---- 1. SIGKILL after snapshots -----------------------------------------------------------------
mkdir -p "$D/kill"
(cd "$D/kill" && exec env LD_PRELOAD="$LIB" POOLSCOPE_OPTIONS="snapshot_interval=1:quiet=1:report=$D/kill/r.%p.json" \
   "$prog" spin 60000 >"$D/kill.out" 2>"$D/kill.err") &
victim=$!
sleep 2.5
kill -KILL "$victim" 2>/dev/null
wait "$victim" 2>/dev/null
ls -la "$D/kill" | sed 's/^/  /'
report=$D/kill/r.$victim.json
if [ ! -f "$report" ]; then
  soft_fail "kill: no report $report after 2.5 s with snapshot_interval=1 and SIGKILL"
else
  reason=$(json_get "$report" 'r["process"]["reason"]' 2>&1)
  [ "$reason" = snapshot ] || soft_fail "kill: process.reason = $reason, expected snapshot"
  # The snapshot thread read the counters while the program's thread was allocating.
  exact=$(json_get "$report" 'r["process"]["counters_exact"]' 2>&1)
  [ "$exact" = False ] || soft_fail "kill: process.counters_exact = $exact for a snapshot of a running process"
  out=$("$PY" "$CHECKER" --expect-no-errors "$report" 2>&1) || soft_fail "kill: check_report.py: $out"
  note "kill: snapshot report ok ($reason)"
fi
leftover=$(ls -A "$D/kill" | grep -v "^r\.$victim\.json$" || true)
[ -z "$leftover" ] || note "kill: other files left in the report folder (a temporary file of a write cut by SIGKILL is possible): $leftover"

# ---- 1b. snapshots while threads allocate ----------------------------------------------------------
# The identities hold in every report (docs/cli.md, `check`), and a snapshot is a report. Copies of the report taken
# every 0.4 s while 3 threads allocate (stress signals) must each pass check_report.py.
mkdir -p "$D/snaps"
(cd "$D/snaps" && exec timeout -k 5 60 env LD_PRELOAD="$LIB" POOLSCOPE_OPTIONS="snapshot_interval=1:quiet=1:report=$D/snaps/r.json" \
   "$prog" signals 4500 >/dev/null 2>&1) &
busy=$!
for i in $(seq 1 10); do
  sleep 0.4
  cp "$D/snaps/r.json" "$D/snaps/copy.$i.json" 2>/dev/null || true
done
wait "$busy"
snaps=()
for f in "$D/snaps"/copy.*.json; do
  [ -f "$f" ] && [ "$(json_get "$f" 'r["process"]["reason"]' 2>/dev/null)" = snapshot ] && snaps+=("$f")
done
if [ ${#snaps[@]} -eq 0 ]; then
  soft_fail "snapshots under load: no snapshot report was caught in 4 s"
else
  out=$("$POOLSCOPE" check "${snaps[@]}" 2>&1)
  nok=$(echo "$out" | grep -c ': ok, ' || true)
  nbad=$((${#snaps[@]} - nok))
  if [ "$nbad" != 0 ]; then
    soft_fail "snapshots under load: $nbad of ${#snaps[@]} snapshot reports break an identity (torn counters):"
    echo "$out" | grep -v ': ok, ' | sed 's/^/  | /' >&2
  else
    note "snapshots under load: ${#snaps[@]} snapshot reports pass poolscope check"
  fi
fi
out=$("$POOLSCOPE" check "$D/snaps/r.json" 2>&1) || soft_fail "snapshots under load: the exit report: $out"

# ---- 2. failed writes ---------------------------------------------------------------------------
failed_write no_folder "report=$D/no/such/folder/r.json"
echo "a regular file" >"$D/regular"
failed_write under_file "report=$D/regular/x.json"
failed_write etc_hostname "report=/etc/hostname/x.json"
failed_write dev_full "report=/dev/full"
# A read-only mount and a full tmpfs need a private mount namespace.
if unshare -m true 2>/dev/null; then
  mkdir -p "$D/ro" "$D/tiny"
  (cd "$D" && timeout -k 5 60 unshare -m bash -c '
      set -e
      mount --bind "$1/ro" "$1/ro" && mount -o remount,bind,ro "$1/ro"
      env LD_PRELOAD="$2" POOLSCOPE_OPTIONS="report=$1/ro/r.json" "$3" hello 7 >"$1/ro.out" 2>"$1/ro.err" || echo $? >"$1/ro.status"
      [ -f "$1/ro.status" ] || echo 0 >"$1/ro.status"
    ' _ "$D" "$LIB" "$prog") 2>"$D/ro.setup"
  if [ -s "$D/ro.status" ]; then
    host_unchanged ro && { one=$(wc -l <"$D/ro.err"); [ "$one" = 1 ] && grep -q '^poolscope: warning: ' "$D/ro.err" && note "read-only mount: ok: $(cat "$D/ro.err")" || { soft_fail "read-only mount: expected one warning line, got:"; sed 's/^/  | /' "$D/ro.err" >&2; }; }
  else
    note "read-only mount: NOT TESTED here (mount failed: $(head -c 300 "$D/ro.setup"))"
  fi
  (cd "$D" && timeout -k 5 60 unshare -m bash -c '
      set -e
      mount -t tmpfs -o size=16k tmpfs "$1/tiny"
      dd if=/dev/zero of="$1/tiny/fill" bs=4k count=100 2>/dev/null || true
      env LD_PRELOAD="$2" POOLSCOPE_OPTIONS="report=$1/tiny/r.json" "$3" hello 7 >"$1/full.out" 2>"$1/full.err" || echo $? >"$1/full.status"
      [ -f "$1/full.status" ] || echo 0 >"$1/full.status"
      ls -A "$1/tiny" >"$1/full.ls"
    ' _ "$D" "$LIB" "$prog") 2>"$D/full.setup"
  if [ -s "$D/full.status" ]; then
    host_unchanged full && { one=$(wc -l <"$D/full.err"); [ "$one" = 1 ] && grep -q '^poolscope: warning: ' "$D/full.err" && note "full tmpfs: ok: $(cat "$D/full.err")" || { soft_fail "full tmpfs: expected one warning line, got:"; sed 's/^/  | /' "$D/full.err" >&2; }; }
    [ "$(cat "$D/full.ls")" = fill ] || soft_fail "full tmpfs: files left behind: $(tr '\n' ' ' <"$D/full.ls")"
  else
    note "disk full on a 16 KiB tmpfs: NOT TESTED here (mount failed: $(head -c 300 "$D/full.setup")); /dev/full covered it"
  fi
else
  note "read-only mount and tiny tmpfs: NOT TESTED here (unshare -m is not allowed in this sandbox)"
fi

# ---- 3. symbolic links --------------------------------------------------------------------------
mkdir -p "$D/link"
printf 'precious\n' >"$D/link/target"
ln -s "$D/link/target" "$D/link/r.json"
ln -s "$D/link/must_not_exist" "$D/link/dangling.json"
run_hello link "quiet=1:report=$D/link/r.json"
host_unchanged link
[ "$(cat "$D/link/target")" = precious ] || soft_fail "symlink: the link's target was written: $(head -c 200 "$D/link/target")"
if [ -L "$D/link/r.json" ] || [ ! -f "$D/link/r.json" ]; then
  soft_fail "symlink: the report path is still a link (or missing): $(ls -la "$D/link/r.json" 2>&1)"
else
  out=$("$PY" "$CHECKER" --expect-no-errors "$D/link/r.json" 2>&1) || soft_fail "symlink: $out"
  note "symlink: the link was replaced by the report; its target is untouched"
fi
run_hello dangling "quiet=1:report=$D/link/dangling.json"
host_unchanged dangling
[ ! -e "$D/link/must_not_exist" ] || soft_fail "dangling symlink: its target was created"
[ -f "$D/link/dangling.json" ] && [ ! -L "$D/link/dangling.json" ] || soft_fail "dangling symlink: no report at the path"

# ---- 4. fifo ------------------------------------------------------------------------------------
mkfifo "$D/fifo"
timeout 30 cat "$D/fifo" >"$D/fifo.json" &
reader=$!
run_hello fifo "quiet=1:report=$D/fifo"
host_unchanged fifo
wait "$reader"
rc=$?
[ "$rc" = 0 ] || soft_fail "fifo: the reader did not get an end of file (status $rc: nothing was written to the fifo?)"
[ -p "$D/fifo" ] || soft_fail "fifo: the fifo was replaced: $(ls -la "$D/fifo")"
if [ -s "$D/fifo.json" ]; then
  out=$("$PY" "$CHECKER" --expect-no-errors "$D/fifo.json" 2>&1) || soft_fail "fifo: $out"
  note "fifo: the report came through the fifo ($(wc -c <"$D/fifo.json") bytes)"
else
  soft_fail "fifo: nothing came through the fifo"
fi

# ---- 5. bad options -----------------------------------------------------------------------------
bad="pool=7:pool_size=3:pools=99:bogus=1:tag=weird:malloc_align=12:stack_depth=-1:snapshot_interval=x:leak_exitcode=256:novalue"
run_hello badopts "$bad:report=$D/bad.json"
host_unchanged badopts
nwarn=$(grep -c '^poolscope: warning: ' "$D/badopts.err")
nother=$(grep -vc '^poolscope: warning: \|^poolscope: report written to ' "$D/badopts.err")
[ "$nwarn" = 10 ] || { soft_fail "bad options: $nwarn warning lines for 10 bad items:"; sed 's/^/  | /' "$D/badopts.err" >&2; }
[ "$nother" = 0 ] || soft_fail "bad options: unexpected stderr lines: $(grep -v '^poolscope: ' "$D/badopts.err")"
for key in pool pool_size pools bogus tag malloc_align stack_depth snapshot_interval leak_exitcode novalue; do
  grep -q "$key" "$D/badopts.err" || soft_fail "bad options: no warning names $key"
done
if [ -f "$D/bad.json" ]; then
  out=$("$PY" "$CHECKER" --expect-no-errors --expect-option pool=1 --expect-option pool_size=64 \
        --expect-option pools=4 --expect-option tag=small --expect-option malloc_align=16 \
        --expect-option stack_depth=16 --expect-option snapshot_interval=0 --expect-option leak_exitcode=0 \
        "$D/bad.json" 2>&1) || soft_fail "bad options: the report's options are not the defaults: $out"
  note "bad options: $nwarn warnings; the report shows the defaults"
else
  soft_fail "bad options: no report at $D/bad.json"
fi

[ "$failures" = 0 ] || fail "$failures durability case(s) failed (above)"
echo PASS
