#!/bin/bash
# leak_exitcode=N (docs/report-schema.md `leak_check`), with tests/programs/leak_exit.c:
#   - a program that leaks ends with N (pool=1 and pool=0, track=1 and track=0), whatever status it
#     chose, also when its only leak is a block inside a pool;
#   - its stdout, a file (so fully buffered, the tail still in stdio's buffer when exit() runs), is
#     byte-identical to the bare run's: the exit flushes it before ending the process;
#   - a program that frees everything keeps its own status (0, and 3), although pools, stdio's
#     buffer and libstdc++'s start-up block are live at exit;
#   - leak_exitcode=0 (the default) changes nothing, and the report has no `leak_check`;
#   - quiet=0: one line on stderr, naming the report and the changed status;
#   - _exit() keeps the program's status (the report still judges the leaks);
#   - another thread holding stdin's lock (waiting in fgets on a pipe nobody writes to), or stdout's:
#     the process still ends with N, promptly (no fflush(NULL) deadlock);
#   - fork() children are judged on their own blocks: the parent's, inherited, do not count.
# Args: LIB CHECKER LEAK_EXIT
source "$(dirname "$0")/integration_lib.sh"
integration_init "$1" "$2"
prog=$(abspath "$3")
RUN_TIMEOUT=20  # a deadlock at exit fails the test instead of hanging it
N=23

status_of() { cat "$WORK/$1/$2/status"; }

expect_status() {  # expect_status NAME MODE STATUS
  local got
  got=$(status_of "$1" "$2")
  if [ "$got" != "$3" ]; then
    echo "stderr of $1/$2:" >&2
    head -c 3000 "$WORK/$1/$2/stderr" | sed 's/^/  | /' >&2
    fail "$1/$2: exit status $got, expected $3"
  fi
}

same_stdout() {  # same_stdout NAME MODE: byte-identical to NAME/bare
  if ! cmp -s "$WORK/$1/bare/stdout" "$WORK/$1/$2/stdout"; then
    echo "bare: $(wc -c <"$WORK/$1/bare/stdout") bytes, $2: $(wc -c <"$WORK/$1/$2/stdout") bytes; tail of $2:" >&2
    tail -c 300 "$WORK/$1/$2/stdout" >&2
    echo >&2
    fail "$1/$2: stdout differs from the bare run (output lost at exit?)"
  fi
}

no_stderr() {
  [ ! -s "$WORK/$1/$2/stderr" ] || { sed 's/^/  | /' "$WORK/$1/$2/stderr" >&2; fail "$1/$2: quiet=1 wrote to stderr"; }
}

# leak_check NAME MODE PYTHON_CONDITION: the one report's leak_check (as c) and the report (as r).
leak_check() {
  local files=("$WORK/$1/$2"/reports/r.*.json)
  [ ${#files[@]} = 1 ] && [ -f "${files[0]}" ] || fail "$1/$2: expected one report, found: $(ls "$WORK/$1/$2/reports")"
  "$PY" - "${files[0]}" "$3" <<'EOF' || fail "$1/$2: leak_check: $3"
import json, sys
r = json.load(open(sys.argv[1]))
c = r.get("leak_check")
ok = eval("(" + sys.argv[2] + ")")  # the condition may span lines
if not ok:
    sys.exit("leak_check = %r; reconciliation = %r" % (c, r["reconciliation"]))
EOF
}

# 1. Leaks: status N, all of stdout kept.
for prog_status in 0 3; do
  name=leak$prog_status
  run_with_options "$name" bare - /dev/null -- "$prog" leak "$prog_status"
  expect_status "$name" bare "$prog_status"
  for pool in 1 0; do
    for track in 1 0; do
      mode=pool${pool}track$track
      run_with_options "$name" "$mode" "pool=$pool:track=$track:quiet=1:leak_exitcode=$N:report=@REPORT@" \
          /dev/null -- "$prog" leak "$prog_status"
      expect_status "$name" "$mode" $N
      same_stdout "$name" "$mode"
      no_stderr "$name" "$mode"
      reports_ok "$name" "$mode" "$pool"
      leak_check "$name" "$mode" \
          "c['program_leak_blocks'] == 3 and c['exit_status'] == $N and c['exact'] == ($track == 1) and
           (c['lost_blocks'] == 3) == ($track == 1)"
    done
  done
done

# 2. The only leak is a block inside a pool: it is the program's (the detector's view cannot see it).
run_with_options leak_pooled bare - /dev/null -- "$prog" leak_pooled
run_with_options leak_pooled pool1 "pool=1:quiet=1:leak_exitcode=$N:report=@REPORT@" /dev/null -- "$prog" leak_pooled
expect_status leak_pooled pool1 $N
same_stdout leak_pooled pool1
leak_check leak_pooled pool1 "c['program_leak_blocks'] == 1 and r['reconciliation']['pooled_live_blocks'] == 1"

# 2b. Blocks the program still points to (a global) are not leaks by the default leak_kinds
# (definite,indirect, as memcheck's errors): its own status; leak_kinds=reachable judges them; with
# track=0 there is no scan and every live block counts.
run_with_options kept bare - /dev/null -- "$prog" kept
for pool in 1 0; do
  run_with_options kept pool$pool "pool=$pool:quiet=1:leak_exitcode=$N:report=@REPORT@" /dev/null -- "$prog" kept
  expect_status kept pool$pool 0
  same_stdout kept pool$pool
  leak_check kept pool$pool "c['judged_by'] == 'reachability' and c['lost_blocks'] == 0 and
      r['reachability']['still_reachable']['blocks'] >= 3 and c['program_leak_blocks'] == 3"
  run_with_options kept reach$pool "pool=$pool:quiet=1:leak_exitcode=$N:leak_kinds=reachable:report=@REPORT@" \
      /dev/null -- "$prog" kept
  expect_status kept reach$pool $N
  leak_check kept reach$pool "c['lost_blocks'] == r['reachability']['still_reachable']['blocks'] and
      r['options']['leak_kinds'] == 'reachable'"
done
run_with_options kept track0 "track=0:quiet=1:leak_exitcode=$N:report=@REPORT@" /dev/null -- "$prog" kept
expect_status kept track0 $N
leak_check kept track0 "c['judged_by'] == 'live_blocks' and c['lost_blocks'] is None"

# 3. Frees everything: its own status, though pools, stdio's buffer and start-up blocks are live.
for prog_status in 0 3; do
  name=clean$prog_status
  run_with_options "$name" bare - /dev/null -- "$prog" clean "$prog_status"
  expect_status "$name" bare "$prog_status"
  for pool in 1 0; do
    for track in 1 0; do
      mode=pool${pool}track$track
      run_with_options "$name" "$mode" "pool=$pool:track=$track:quiet=1:leak_exitcode=$N:report=@REPORT@" \
          /dev/null -- "$prog" clean "$prog_status"
      expect_status "$name" "$mode" "$prog_status"
      same_stdout "$name" "$mode"
      no_stderr "$name" "$mode"
      reports_ok "$name" "$mode" "$pool"
      leak_check "$name" "$mode" "c['program_leak_blocks'] == 0 and c['exit_status'] is None and
          c['stdio_buffers'] == 1 and c['live_at_start'] >= 1"
    done
  done
  # Pool memory is live at exit, and still no leak.
  leak_check "$name" pool1track1 "r['real']['live_blocks'] > r['logical']['live_blocks'] and
      r['reconciliation']['pools_cached'] + r['reconciliation']['pools_in_use'] > 0"
done

# 4. leak_exitcode=0 (the default) and unset: nothing changes; quiet=0 gives the usual one line.
for pair in "off0:leak_exitcode=0:" "offunset:"; do
  mode=${pair%%:*}
  opts=${pair#*:}
  run_with_options leak3 "$mode" "${opts}quiet=0:report=@REPORT@" /dev/null -- "$prog" leak 3
  expect_status leak3 "$mode" 3
  same_stdout leak3 "$mode"
  reports_ok leak3 "$mode" 1
  leak_check leak3 "$mode" "c is None"
  report=$(ls "$WORK/leak3/$mode/reports"/r.*.json)
  [ "$(cat "$WORK/leak3/$mode/stderr")" = "poolscope: report written to $report" ] ||
    fail "leak3/$mode: stderr is not the one report line: $(cat "$WORK/leak3/$mode/stderr")"
done

# 5. quiet=0 with a changed status: one line, naming the report and the status.
run_with_options leak3 quiet0 "quiet=0:leak_exitcode=$N:report=@REPORT@" /dev/null -- "$prog" leak 3
expect_status leak3 quiet0 $N
same_stdout leak3 quiet0
report=$(ls "$WORK/leak3/quiet0/reports"/r.*.json)
err=$WORK/leak3/quiet0/stderr
[ "$(wc -l <"$err")" = 1 ] || fail "leak3/quiet0: expected one line on stderr: $(cat "$err")"
grep -qF -- "report written to $report" "$err" || fail "leak3/quiet0: the line does not name the report: $(cat "$err")"
grep -qF -- "exit status $N" "$err" || fail "leak3/quiet0: the line does not say the status changed: $(cat "$err")"
# With report=none, the line is still there, alone.
run_with_options leak3 quiet0none "quiet=0:leak_exitcode=$N:report=none" /dev/null -- "$prog" leak 3
expect_status leak3 quiet0none $N
[ "$(wc -l <"$WORK/leak3/quiet0none/stderr")" = 1 ] && grep -qF -- "exit status $N" "$WORK/leak3/quiet0none/stderr" ||
  fail "leak3/quiet0none: stderr: $(cat "$WORK/leak3/quiet0none/stderr")"

# 6. _exit(): the program's status stays; the report judges the leaks all the same.
for prog_status in 0 3; do
  name=exit_leak$prog_status
  run_with_options "$name" bare - /dev/null -- "$prog" exit_leak "$prog_status"
  run_with_options "$name" pool1 "pool=1:quiet=1:leak_exitcode=$N:report=@REPORT@" /dev/null -- \
      "$prog" exit_leak "$prog_status"
  expect_status "$name" pool1 "$prog_status"
  same_stdout "$name" pool1
  leak_check "$name" pool1 "c['program_leak_blocks'] == 3 and c['exit_status'] is None"
done

# 7. Another thread holds stdin's lock (fgets on a pipe nobody writes to), then stdout's: status N,
# within seconds. With stdin held, stdout is free and all of it is kept.
for held in stdin_held stdout_held; do
  run_with_options "$held" bare - /dev/null -- "$prog" "$held" 3
  expect_status "$held" bare 3
  for pool in 1 0; do
    start=$(date +%s%N)
    run_with_options "$held" pool$pool "pool=$pool:quiet=1:leak_exitcode=$N:report=@REPORT@" /dev/null -- \
        "$prog" "$held" 3
    ms=$((($(date +%s%N) - start) / 1000000))
    expect_status "$held" pool$pool $N
    [ "$ms" -lt 5000 ] || fail "$held/pool$pool: took $ms ms to exit"
    leak_check "$held" pool$pool "c['program_leak_blocks'] >= 3 and c['exit_status'] == $N"
    [ "$held" = stdout_held ] || same_stdout "$held" pool$pool
  done
done

# 8. fork(): each child is judged on what it allocated itself. The parent keeps two blocks while it
# forks; the first child frees everything it allocates, the second keeps one block.
run_with_options fork bare - /dev/null -- "$prog" fork
[ "$(cat "$WORK/fork/bare/stdout")" = "children: 0 0" ] || fail "fork/bare: $(cat "$WORK/fork/bare/stdout")"
for pool in 1 0; do
  run_with_options fork pool$pool "pool=$pool:quiet=1:leak_exitcode=$N:report=@REPORT@" /dev/null -- "$prog" fork
  expect_status fork pool$pool 0
  [ "$(cat "$WORK/fork/pool$pool/stdout")" = "children: 0 $N" ] ||
    fail "fork/pool$pool: children's statuses: $(cat "$WORK/fork/pool$pool/stdout"), expected 'children: 0 $N'"
done
echo "PASS: leak_exitcode"
