#!/bin/bash
# File: tests/tools/run_test.sh
#
# `poolscope run` and `poolscope compare` with the real preload library (//interpose:libpoolscope.so,
# found by poolscope in its runfiles): the child's exit status passes through (3 from
# /bin/sh -c 'exit 3', 128+15 for SIGTERM, 127 for a missing command), the child's stdout is
# untouched and the summary goes to stderr, the child sees LD_PRELOAD (ours first),
# POOLSCOPE_OPTIONS and POOLSCOPE_ROOT_PID equal to its own pid, a `-o` template (%e %p %%) names
# the file written and read; compare runs a command and the
# bundled demo twice, writes both reports (each run's in a folder of its own), prints the table,
# and --fail-on-leak exits 1 on the demo's deliberate leaks; its temporary folder is removed at the
# end unless --keep.
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

# 2b. A report path template, expanded by the library and found again by run: %e is the
#     executable's name, %p the child's pid, %% one '%'; the brackets are taken literally.
mkdir "$T/tpl"
"$POOLSCOPE" run --options=quiet=1 -o "$T/tpl/r[%%].%e.%p.json" -- /bin/bash -c 'echo $$' >"$T/out2b" 2>"$T/err2b"
check_rc $? 0 "run with a path template"
want="$T/tpl/r[%].bash.$(cat "$T/out2b").json"
[ -s "$want" ] || fail "template: no report at $want; the folder holds: $(ls "$T/tpl")"
[ "$(ls "$T/tpl" | wc -l)" = 1 ] || fail "template: more than one file: $(ls "$T/tpl")"
grep -qxF "poolscope: exit 0; report $want" "$T/err2b" || fail "template summary: $(cat "$T/err2b")"

# 2c. A report folder that does not exist yet is made before the program runs.
"$POOLSCOPE" run --options=quiet=1 -o "$T/new/sub/r.json" -- /bin/true >/dev/null 2>"$T/err2c"
check_rc $? 0 "run into a missing folder"
[ -s "$T/new/sub/r.json" ] || fail "no report in the folder run was to make: $(cat "$T/err2c")"

# 3. Killed by a signal: 128 + 15.
"$POOLSCOPE" run -- /bin/sh -c 'kill -TERM $$' >/dev/null 2>"$T/err3"
check_rc $? 143 "run killed by SIGTERM"
grep -q 'killed by signal 15' "$T/err3" || fail "signal not named: $(cat "$T/err3")"

# 4. A command that does not exist: 127 and one line.
"$POOLSCOPE" run -- /nonexistent/command >/dev/null 2>"$T/err4"
check_rc $? 127 "run missing command"
[ "$(cat "$T/err4")" = "poolscope: /nonexistent/command: No such file or directory" ] || fail "missing command: $(cat "$T/err4")"

# 5. compare with a command: two reports, the child's output once (the first run's, the second
#    run's kept in DIR/on.stdout), then the table.
mkdir "$T/cmp"
"$POOLSCOPE" compare --report-dir="$T/cmp" -- "$DEMO" --threads=2 --rounds=300 >"$T/out5" 2>"$T/err5"
check_rc $? 0 "compare demo"
[ "$(grep -c '^checksum ' "$T/out5")" = 1 ] || fail "the demo's line is not shown once: $(cat "$T/out5")"
head -1 "$T/out5" | grep -q '^checksum .* threads 2 rounds 300$' || fail "the demo's line is not first: $(cat "$T/out5")"
grep -q '^checksum ' "$T/cmp/off.stdout" && cmp -s "$T/cmp/off.stdout" "$T/cmp/on.stdout" \
  || fail "the runs' outputs: $(cat "$T/cmp/off.stdout" "$T/cmp/on.stdout")"
grep -q 'printed something else' "$T/out5" && fail "a note on outputs that are the same"
for row in 'logical allocations' 'real allocations' 'real frees' 'real blocks live at exit' \
    'detector view: unfreed blocks' '  of which outside pools' '  of which pool blocks' \
    'pool hits' 'pools created' 'pools reused' 'pools cached at exit' 'wall time' 'peak RSS'; do
  grep -q "^$row  " "$T/out5" || fail "compare table lacks row '$row'"
done
grep -q "^  of which poolscope's own memory (peak)  *[0-9.]* [KM]iB  *[0-9.]* [KM]iB" "$T/out5" \
  || fail "compare lacks poolscope's own memory: $(cat "$T/out5")"
grep -q 'pooling off  pooling on  change' "$T/out5" || fail "compare header: $(cat "$T/out5")"
grep -q '^hint: the "detector view" rows are what memcheck' "$T/out5" || fail "no detector-view hint: $(cat "$T/out5")"
grep -q 'pymalloc' "$T/out5" && fail "a pymalloc hint for a program that is no python: $(cat "$T/out5")"

# 5b. compare on python3: a hint names python's own allocator, unless PYTHONMALLOC=malloc.
if [ -x /usr/bin/python3 ]; then
  env -u PYTHONMALLOC "$POOLSCOPE" compare --report-dir="$T/py1" -- /usr/bin/python3 -c 'pass' >"$T/out5b" 2>/dev/null
  grep -q '^hint: python3[0-9.]* serves its small objects from its own allocator (pymalloc): [0-9,]* of its allocations reached malloc; PYTHONMALLOC=malloc sends every one through it$' "$T/out5b" \
    || fail "no pymalloc hint: $(cat "$T/out5b")"
  PYTHONMALLOC=malloc "$POOLSCOPE" compare --report-dir="$T/py2" -- /usr/bin/python3 -c 'pass' >"$T/out5c" 2>/dev/null
  grep -q 'pymalloc' "$T/out5c" && fail "a pymalloc hint under PYTHONMALLOC=malloc: $(cat "$T/out5c")"
fi
[ -s "$T/cmp/off/off.json" ] && [ -s "$T/cmp/on/on.json" ] || fail "compare reports missing: $(ls -R "$T/cmp")"
grep -qxF "reports: $T/cmp/off/off.json (off), $T/cmp/on/on.json (on); kept: poolscope diff $T/cmp/off/off.json $T/cmp/on/on.json" \
  "$T/out5" || fail "the reports' line: $(grep '^reports' "$T/out5")"
grep -q 'run 1 of 2, pooling off' "$T/err5" && grep -q 'run 2 of 2, pooling on' "$T/err5" || fail "progress lines: $(cat "$T/err5")"
"$POOLSCOPE" diff "$T/cmp/off/off.json" "$T/cmp/on/on.json" >/dev/null || fail "diff of compare's reports"

# 5d. compare's own temporary folder is removed when it ends, and the lines naming the reports and
#     the second run's output say so; --keep keeps it, and the line says how to compare them again.
#     An error after the runs (a --process that matches nothing) removes it too.
mkdir "$T/tmpc" "$T/tmpk" "$T/tmpe"
TMPDIR="$T/tmpc" "$POOLSCOPE" compare -- /bin/bash -c 'echo "pid $$"' >"$T/out5d" 2>"$T/err5d"
check_rc $? 0 "compare into a temporary folder"
[ -z "$(ls -A "$T/tmpc")" ] || fail "compare left its temporary folder: $(ls -AR "$T/tmpc")"
grep -q "^reports: $T/tmpc/poolscope\.[A-Za-z0-9]*/off/off\.json (off), $T/tmpc/poolscope\.[A-Za-z0-9]*/on/on\.json (on); removed when compare ends (--keep keeps them)$" \
  "$T/out5d" || fail "the reports' line of a temporary folder: $(cat "$T/out5d")"
grep -q "^note: with pooling on the program printed something else: $T/tmpc/poolscope\.[A-Za-z0-9]*/on\.stdout (removed when compare ends; --keep keeps it)$" \
  "$T/out5d" || fail "the note on the second run's output: $(cat "$T/out5d")"
TMPDIR="$T/tmpk" "$POOLSCOPE" compare --keep -- /bin/true >"$T/out5k" 2>"$T/err5k"
check_rc $? 0 "compare --keep"
kept=$(ls -d "$T/tmpk"/poolscope.*)
[ -s "$kept/off/off.json" ] && [ -s "$kept/on/on.json" ] || fail "compare --keep kept: $(ls -AR "$T/tmpk")"
grep -qxF "reports: $kept/off/off.json (off), $kept/on/on.json (on); kept: poolscope diff $kept/off/off.json $kept/on/on.json" \
  "$T/out5k" || fail "the reports' line with --keep: $(cat "$T/out5k")"
"$POOLSCOPE" diff "$kept/off/off.json" "$kept/on/on.json" >/dev/null || fail "diff of the kept reports"
TMPDIR="$T/tmpe" "$POOLSCOPE" compare --process='nothing*' -- /bin/true >/dev/null 2>"$T/err5e"
check_rc $? 2 "compare --process matching nothing"
[ -z "$(ls -A "$T/tmpe")" ] || fail "compare left its temporary folder after an error: $(ls -AR "$T/tmpe")"

# 6. compare with no command runs the bundled demo; its leaks make --fail-on-leak exit 1.
"$POOLSCOPE" compare --fail-on-leak >"$T/out6" 2>"$T/err6"
check_rc $? 1 "compare --fail-on-leak on the demo"
head -1 "$T/out6" | grep -q "^checksum .* threads 4 rounds 20000$" || fail "default demo did not run: $(cat "$T/out6")"
[ "$(grep -c '^checksum ' "$T/out6")" = 1 ] || fail "the demo's line is not shown once: $(cat "$T/out6")"
grep -q '^poolscope compare: demo_workload$' "$T/out6" || fail "the demo is not named demo_workload: $(cat "$T/out6")"
grep -q '^poolscope: comparing demo_workload$' "$T/err6" || fail "the demo is not named demo_workload: $(cat "$T/err6")"
grep -q 'bazel-out\|\.runfiles' "$T/out6" "$T/err6" && fail "the demo is named by its build path"
grep -q '^poolscope: --fail-on-leak: the program leaks' "$T/err6" || fail "fail-on-leak line: $(cat "$T/err6")"

# 6b. A program that prints something else in its second run gets a note after its first output.
"$POOLSCOPE" compare --report-dir="$T/cmp" -- /bin/bash -c 'echo "pid $$"' >"$T/out6b" 2>"$T/err6b"
check_rc $? 0 "compare bash"
head -1 "$T/out6b" | grep -q '^pid [0-9]*$' || fail "the first run's output is not first: $(cat "$T/out6b")"
[ "$(grep -c '^pid ' "$T/out6b")" = 1 ] || fail "the output is not shown once: $(cat "$T/out6b")"
sed -n 2p "$T/out6b" | grep -q "^note: with pooling on the program printed something else: $T/cmp/on.stdout$" \
  || fail "no note on differing output: $(cat "$T/out6b")"

# 7. compare passes a child's failure through.
"$POOLSCOPE" compare -- /bin/sh -c 'exit 4' >/dev/null 2>&1
check_rc $? 4 "compare passes the child's status"

# 8. Programs LD_PRELOAD cannot reach: run passes them through (their status, their stdout) with one
#    line saying why there is no report; compare refuses them (2, one line) before running anything.
STATIC="$PWD/tests/tools/static_hello"
"$POOLSCOPE" run -- "$STATIC" >"$T/out8" 2>"$T/err8"
check_rc $? 3 "run on a static program"
[ "$(cat "$T/out8")" = "static hello 1" ] || fail "static program's stdout: $(cat "$T/out8")"
grep -q "^poolscope: .*static_hello: it is statically linked, so LD_PRELOAD cannot load poolscope into it" "$T/err8" \
  || fail "no line saying the static program cannot be reached: $(cat "$T/err8")"
grep -q '^poolscope: exit 3; no report$' "$T/err8" || fail "static run's closing line: $(cat "$T/err8")"
grep -q "no such file" "$T/err8" && fail "static run still looks for a report: $(cat "$T/err8")"
"$POOLSCOPE" compare -- "$STATIC" >"$T/out8c" 2>"$T/err8c"
check_rc $? 2 "compare on a static program"
[ "$(wc -l <"$T/err8c")" = 1 ] && grep -q "statically linked.*nothing to compare" "$T/err8c" \
  || fail "compare on a static program: $(cat "$T/err8c")"
[ ! -s "$T/out8c" ] || fail "compare ran the static program: $(cat "$T/out8c")"
printf '#!%s\n' "$STATIC" >"$T/script.sh" && chmod +x "$T/script.sh"
"$POOLSCOPE" compare -- "$T/script.sh" >/dev/null 2>"$T/err8s"
check_rc $? 2 "compare on a script run by a static interpreter"
grep -q "its interpreter .*static_hello is statically linked" "$T/err8s" || fail "script: $(cat "$T/err8s")"
# A dynamically linked program is not refused (the earlier checks run /bin/sh and the demo).
# Set-user-ID to another user: the dynamic linker runs it in secure mode, without LD_PRELOAD. Only
# where this test may give a file away and the set-user-ID bit takes effect, which the program
# shows by naming its user: not in Bazel's sandbox, which maps no other user (run this script by
# hand as root, from bazel-bin/tests/tools/run_test.runfiles/poolscope, to see it checked).
if cp /usr/bin/id "$T/suid_id" 2>/dev/null && chown nobody "$T/suid_id" 2>/dev/null && chmod u+s "$T/suid_id" 2>/dev/null \
   && [ "$("$T/suid_id" -un 2>/dev/null)" = nobody ] && [ "$(id -un)" != nobody ]; then
  "$POOLSCOPE" run -- "$T/suid_id" -un >/dev/null 2>"$T/err8u"
  check_rc $? 0 "run on a set-user-ID program"
  grep -q "suid_id: it is set-user-ID, so LD_PRELOAD" "$T/err8u" || fail "set-user-ID: $(cat "$T/err8u")"
fi

rm -rf "$T"
if [ "$failures" -ne 0 ]; then
  echo "0 passed, $failures failed"
  exit 1
fi
echo "run_test: all checks passed"
