#!/bin/bash
# File: tests/tools/run_test.sh
#
# `poolscope run` and `poolscope compare` with the real preload library (//interpose:libpoolscope.so,
# found by poolscope in its runfiles): the child's exit status passes through (3 from
# /bin/sh -c 'exit 3', 128+15 for SIGTERM, 127 for a missing command), the child's stdout is
# untouched and the summary goes to stderr, the child sees LD_PRELOAD (ours first),
# POOLSCOPE_OPTIONS and POOLSCOPE_ROOT_PID equal to its own pid; compare runs a command and the
# bundled demo twice, writes both reports, prints the table, and --fail-on-leak exits 1 on the
# demo's deliberate leaks.
set -u
POOLSCOPE="$PWD/tools/poolscope"
DEMO="$PWD/tools/demo_workload"
LIB="$PWD/interpose/libpoolscope.so"
T="$(mktemp -d "${TEST_TMPDIR:-/tmp}/run_test.XXXXXX")"
export TMPDIR="$T"
unset POOLSCOPE_LIB POOLSCOPE_OPTIONS
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
check_rc() { [ "$1" = "$2" ] || fail "$3: exit status $1, expected $2"; }

[ -x "$POOLSCOPE" ] || { echo "FAIL: $POOLSCOPE missing" >&2; exit 1; }
[ -f "$LIB" ] || { echo "FAIL: $LIB missing" >&2; exit 1; }

# 1. Exit status passes through; the report defaults to a temporary file named on stderr.
"$POOLSCOPE" run -- /bin/sh -c 'exit 3' >"$T/out1" 2>"$T/err1"
check_rc $? 3 "run sh -c 'exit 3'"
grep -q '^poolscope: exit 3; report /.*/report.json (temporary)$' "$T/err1" || fail "no report line: $(cat "$T/err1")"
[ ! -s "$T/out1" ] || fail "run wrote to stdout: $(cat "$T/out1")"

# 2. The child's environment and stdout (bash, which ends through exit(3): dash ends with _exit(2)
#    and so writes no report).
LD_PRELOAD=libm.so.6 "$POOLSCOPE" run --pool=off --options=quiet=1:stack_depth=4 -o "$T/r2.json" -- \
  /bin/bash -c 'echo "pid $POOLSCOPE_ROOT_PID $$"; echo "preload $LD_PRELOAD"; echo "options $POOLSCOPE_OPTIONS"' \
  >"$T/out2" 2>"$T/err2"
check_rc $? 0 "run env"
read -r _ root self < <(sed -n 1p "$T/out2")
[ -n "$root" ] && [ "$root" = "$self" ] || fail "POOLSCOPE_ROOT_PID '$root' is not the child's pid '$self'"
[ "$(sed -n 2p "$T/out2")" = "preload $(readlink -f "$LIB"):libm.so.6" ] || fail "LD_PRELOAD: $(sed -n 2p "$T/out2")"
[ "$(sed -n 3p "$T/out2")" = "options pool=0:quiet=1:stack_depth=4:report=$T/r2.json" ] || fail "POOLSCOPE_OPTIONS: $(sed -n 3p "$T/out2")"
[ "$(wc -l <"$T/out2")" = 3 ] || fail "stdout has more than the child's lines: $(cat "$T/out2")"
[ -s "$T/r2.json" ] || fail "no report at -o $T/r2.json"
grep -q '^poolscope: exit 0; report '"$T"'/r2.json$' "$T/err2" || fail "summary: $(cat "$T/err2")"
grep -q '^poolscope: detector view: ' "$T/err2" || fail "no detector view in summary: $(cat "$T/err2")"
"$POOLSCOPE" report "$T/r2.json" >/dev/null || fail "report of run's report"

# 3. Killed by a signal: 128 + 15.
"$POOLSCOPE" run -- /bin/sh -c 'kill -TERM $$' >/dev/null 2>"$T/err3"
check_rc $? 143 "run killed by SIGTERM"
grep -q 'killed by signal 15' "$T/err3" || fail "signal not named: $(cat "$T/err3")"

# 4. A command that does not exist: 127 and one line.
"$POOLSCOPE" run -- /nonexistent/command >/dev/null 2>"$T/err4"
check_rc $? 127 "run missing command"
[ "$(cat "$T/err4")" = "poolscope: /nonexistent/command: No such file or directory" ] || fail "missing command: $(cat "$T/err4")"

# 5. compare with a command: two reports, a table on stdout after the child's output.
mkdir "$T/cmp"
"$POOLSCOPE" compare --report-dir="$T/cmp" -- "$DEMO" --threads=2 --rounds=300 >"$T/out5" 2>"$T/err5"
check_rc $? 0 "compare demo"
[ "$(grep -c '^checksum ' "$T/out5")" = 2 ] || fail "the demo did not run twice: $(cat "$T/out5")"
[ "$(grep '^checksum ' "$T/out5" | sort -u | wc -l)" = 1 ] || fail "checksums differ between runs"
for row in 'logical allocations' 'real allocations' 'real frees' 'real blocks live at exit' \
    'detector view: unfreed blocks' '  of which program leaks' '  of which pool blocks' \
    'pool hits' 'pools created' 'pools reused' 'pools cached at exit' 'wall time' 'peak RSS'; do
  grep -q "^$row  " "$T/out5" || fail "compare table lacks row '$row'"
done
grep -q 'pooling off  pooling on  change' "$T/out5" || fail "compare header: $(cat "$T/out5")"
[ -s "$T/cmp/off.json" ] && [ -s "$T/cmp/on.json" ] || fail "compare reports missing"
grep -q 'run 1 of 2, pooling off' "$T/err5" && grep -q 'run 2 of 2, pooling on' "$T/err5" || fail "progress lines: $(cat "$T/err5")"
"$POOLSCOPE" diff "$T/cmp/off.json" "$T/cmp/on.json" >/dev/null || fail "diff of compare's reports"

# 6. compare with no command runs the bundled demo; its leaks make --fail-on-leak exit 1.
"$POOLSCOPE" compare --fail-on-leak >"$T/out6" 2>"$T/err6"
check_rc $? 1 "compare --fail-on-leak on the demo"
grep -q "^checksum .* threads 4 rounds 20000$" "$T/out6" || fail "default demo did not run: $(cat "$T/out6")"
grep -q '^poolscope: --fail-on-leak: the program leaks' "$T/err6" || fail "fail-on-leak line: $(cat "$T/err6")"

# 7. compare passes a child's failure through.
"$POOLSCOPE" compare -- /bin/sh -c 'exit 4' >/dev/null 2>&1
check_rc $? 4 "compare passes the child's status"

rm -rf "$T"
if [ "$failures" -ne 0 ]; then
  echo "0 passed, $failures failed"
  exit 1
fi
echo "run_test: all checks passed"
