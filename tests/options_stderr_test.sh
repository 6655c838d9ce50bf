#!/bin/bash
# What poolscope writes on stderr, and what bad options do (README.md, "Using it"):
#   quiet=0            exactly one line on stderr, and it names the report that was written
#   quiet=1            nothing on stderr
#   bogus_key=1        one warning line naming the key, besides the report line (quiet=0)
#   pool_size=abc      one warning line naming pool_size; options.pool_size keeps its default 64
#   pools=99           one warning line naming pools; options.pools keeps its default 4
# and in every case stdout and the exit status are the bare run's and the report passes
# check_report.py.
# Args: LIB CHECKER PROGRAM (thread_churn)
source "$(dirname "$0")/integration_lib.sh"
integration_init "$1" "$2"
prog=$(abspath "$3")

run_with_options stderr bare - /dev/null -- "$prog" 1
[ ! -s "$WORK/stderr/bare/stderr" ] || fail "the bare run wrote to stderr: $(cat "$WORK/stderr/bare/stderr")"

the_report() {  # the one report of a run
  local dir=$WORK/stderr/$1/reports
  local files=("$dir"/r.*.json)
  [ ${#files[@]} = 1 ] && [ -f "${files[0]}" ] || fail "stderr/$1: expected one report, found: $(ls "$dir")"
  echo "${files[0]}"
}

option_value() {  # option_value MODE KEY: options.KEY of the report
  "$PY" -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1]))["options"][sys.argv[2]]))' "$(the_report "$1")" "$2"
}

show_stderr() {
  echo "stderr of $1:" >&2
  sed 's/^/  | /' "$WORK/stderr/$1/stderr" >&2
}

# quiet=0: one line, naming the report.
run_with_options stderr quiet0 "quiet=0:report=@REPORT@" /dev/null -- "$prog" 1
same_stdout_status() {
  cmp -s "$WORK/stderr/bare/stdout" "$WORK/stderr/$1/stdout" || fail "stderr/$1: stdout differs from the bare run"
  [ "$(cat "$WORK/stderr/bare/status")" = "$(cat "$WORK/stderr/$1/status")" ] ||
    fail "stderr/$1: exit status $(cat "$WORK/stderr/$1/status"), the bare run's was $(cat "$WORK/stderr/bare/status")"
}
same_stdout_status quiet0
reports_ok stderr quiet0 1
report=$(the_report quiet0) || exit 1
lines=$(wc -l <"$WORK/stderr/quiet0/stderr")
[ "$lines" = 1 ] || { show_stderr quiet0; fail "quiet=0: expected exactly one line on stderr, got $lines"; }
grep -qF -- "$report" "$WORK/stderr/quiet0/stderr" ||
  { show_stderr quiet0; fail "quiet=0: the stderr line does not name the report $report"; }

# quiet=1: nothing.
run_with_options stderr quiet1 "quiet=1:report=@REPORT@" /dev/null -- "$prog" 1
same_stdout_status quiet1
reports_ok stderr quiet1 1
[ ! -s "$WORK/stderr/quiet1/stderr" ] || { show_stderr quiet1; fail "quiet=1: stderr is not empty"; }

# Bad options: one warning line naming the key, plus the report line; the default is kept.
# bad_option MODE OPTION KEY_NAMED [OPTION_KEY DEFAULT]
bad_option() {
  local mode=$1 option=$2 key=$3 opt_key=${4:-} default=${5:-}
  run_with_options stderr "$mode" "quiet=0:$option:report=@REPORT@" /dev/null -- "$prog" 1
  same_stdout_status "$mode"
  reports_ok stderr "$mode" 1
  local report err
  report=$(the_report "$mode") || exit 1
  err=$WORK/stderr/$mode/stderr
  local total others
  total=$(wc -l <"$err")
  others=$(grep -cvF -- "$report" "$err" || true)
  if [ "$total" != 2 ] || [ "$others" != 1 ]; then
    show_stderr "$mode"
    fail "$option: expected one warning line and the report line on stderr, got $total line(s), $others not naming the report"
  fi
  grep -vF -- "$report" "$err" | grep -qF -- "$key" ||
    { show_stderr "$mode"; fail "$option: the warning line does not name '$key'"; }
  if [ -n "$opt_key" ]; then
    local got
    got=$(option_value "$mode" "$opt_key") || fail "$option: cannot read options.$opt_key"
    [ "$got" = "$default" ] || fail "$option: options.$opt_key = $got in the report, expected the default $default"
  fi
}
bad_option unknown_key "bogus_key=1" bogus_key
bad_option pool_size_abc "pool_size=abc" pool_size pool_size 64
bad_option pools_99 "pools=99" pools pools 4
echo PASS
