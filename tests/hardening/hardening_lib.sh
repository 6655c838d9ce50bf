# File: tests/hardening/hardening_lib.sh
#
# Sourced by the hardening tests. Part 1 is tests/integration_lib.sh (run_with_options, same_as_bare,
# reports_ok, single_report), sourced from its place in the runfiles tree. Part 2 adds the long/short
# switch and helpers.

# ---- part 1: tests/integration_lib.sh ----
source "$(dirname "${BASH_SOURCE[0]}")/../integration_lib.sh"

# ---- part 2: hardening helpers ----
# POOLSCOPE_HARDENING_LONG=1 (bazel test --test_env=POOLSCOPE_HARDENING_LONG=1) selects the long
# form of every test tagged "long"; the default is the short form that fits CI.

LONG=${POOLSCOPE_HARDENING_LONG:-0}

# pick SHORT LONG: the value for the form selected.
pick() {
  if [ "$LONG" = 1 ]; then echo "$2"; else echo "$1"; fi
}

now_ms() { date +%s%3N; }

# The poolscope command (//tools:poolscope, in every hardening test's data), for `poolscope check`.
POOLSCOPE=${POOLSCOPE_BIN:-${TEST_SRCDIR:-}/poolscope/tools/poolscope}

# check_reports FILE... : every file passes check_report.py (the identities) and has no errors.
check_reports() {
  local out
  if ! out=$("$PY" "$CHECKER" --expect-no-errors "$@" 2>&1); then
    echo "$out" | grep -v '^ok ' >&2
    fail "check_report.py rejected a report (above)"
  fi
}

# json_get FILE EXPR: prints the Python expression EXPR evaluated on the report as `r`.
json_get() {
  "$PY" -c 'import json,sys; r=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"
}

# one_warning_line STDERR_FILE WHAT: the file holds exactly one line, a poolscope warning.
one_warning_line() {
  local f=$1 what=$2 n
  n=$(wc -l <"$f")
  if [ "$n" != 1 ] || ! grep -q '^poolscope: warning: ' "$f"; then
    echo "stderr of the run ($n lines):" >&2
    sed 's/^/  | /' "$f" >&2
    fail "$what: expected exactly one 'poolscope: warning:' line on stderr"
  fi
  note "$what: one warning line: $(cat "$f")"
}
