#!/bin/bash
# File: tests/tools/tree_real_test.sh
#
# Real process trees under `poolscope compare`: make -j2 of a small C project (make, sh, gcc and
# gcc's cc1, as, collect2, ld), a python3 multiprocessing pool (/usr/bin/python3, and python3 as
# found in PATH, which may be a wrapper script that execs the interpreter), git commands that start
# children (gc, an alias run through the shell), and a pipeline of five programs. For each: both
# runs print exactly what the bare run prints (stdout byte for byte, stderr once poolscope's own
# lines are taken out), the tree holds more than one report, the tree's logical allocations are the
# sum of the reports in the folder, only the roots print "report written", and every report is
# complete with its identities holding (`poolscope check`).
set -u
POOLSCOPE="$PWD/tools/poolscope"
T="$(mktemp -d "${TEST_TMPDIR:-/tmp}/tree_real_test.XXXXXX")"
export TMPDIR="$T"
unset POOLSCOPE_LIB POOLSCOPE_OPTIONS POOLSCOPE_ROOT_PID
export GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@example.invalid GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@example.invalid
export GIT_AUTHOR_DATE="2026-01-01T00:00:00Z" GIT_COMMITTER_DATE="2026-01-01T00:00:00Z"
export HOME="$T/home" GIT_CONFIG_NOSYSTEM=1 LC_ALL=C
mkdir -p "$HOME"
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
sum_logical() { /usr/bin/python3 -c 'import json,sys
print(sum(json.load(open(f))["logical"]["allocs"] for f in sys.argv[1:]))' "$@"; }

# A small C project: three files and a Makefile.
P="$T/proj"
mkdir -p "$P"
for n in 1 2 3; do printf 'int f%d(int x) { return x * %d; }\n' "$n" "$n" >"$P/f$n.c"; done
printf 'int f1(int), f2(int), f3(int);\nint main(void) { return f1(1) + f2(2) + f3(3) - 14; }\n' >"$P/main.c"
printf 'prog: main.o f1.o f2.o f3.o\n\tgcc -o $@ $^\n%%.o: %%.c\n\tgcc -c -O1 -o $@ $<\n' >"$P/Makefile"
# A git repository.
G="$T/repo"
# (A machine with no git identity configured still commits here.)
export GIT_AUTHOR_NAME=poolscope GIT_AUTHOR_EMAIL=poolscope@localhost GIT_COMMITTER_NAME=poolscope \
  GIT_COMMITTER_EMAIL=poolscope@localhost
git init -q "$G" && (cd "$G" && seq 1 300 >f && git add f && git commit -qm one && seq 1 2 300 >f && git commit -qam two) ||
  fail "setting up the git repository"

commands=(
  "make -s -B -j2 -C $P && $P/prog && echo built"
  "/usr/bin/python3 -c 'import multiprocessing as mp
if __name__ == \"__main__\":
    with mp.Pool(2) as p: print(sum(p.map(len, [\"x\" * i for i in range(2000)])))'"
  "python3 -c 'print(sum(range(1000)))'"
  "cd $G && git gc --quiet && git -c alias.hi='!echo hi from the shell' hi && git log --format=%s | sort"
  "seq 1 20000 | sort -r | uniq | grep 7 | wc -l"
)

i=0
for cmd in "${commands[@]}"; do
  i=$((i + 1))
  W="$T/case$i"
  mkdir -p "$W/reports"
  /bin/sh -c "$cmd" >"$W/bare.out" 2>"$W/bare.err"
  bare_status=$?
  [ "$bare_status" = 0 ] || { fail "case $i: the bare run failed ($bare_status): $(head -c 300 "$W/bare.err")"; continue; }
  "$POOLSCOPE" compare --report-dir="$W/reports" -- /bin/sh -c "$cmd" >"$W/cmp.out" 2>"$W/cmp.err"
  status=$?
  [ "$status" = 0 ] || { fail "case $i: compare exited $status: $(tail -3 "$W/cmp.err")"; continue; }
  for side in off on; do
    cmp -s "$W/bare.out" "$W/reports/$side.stdout" ||
      fail "case $i ($side): stdout differs from the bare run: $(diff "$W/bare.out" "$W/reports/$side.stdout" | head -5)"
    files=("$W/reports/$side/$side.json" "$W/reports/$side/$side".json.[0-9]*)
    [ "${#files[@]}" -gt 1 ] || fail "case $i ($side): only ${#files[@]} report"
    "$POOLSCOPE" check "${files[@]}" >"$W/check.$side" 2>&1 || fail "case $i ($side): check: $(grep -v ': ok,' "$W/check.$side" | head -3)"
  done
  grep -v '^poolscope: ' "$W/cmp.err" | sed 's/^\r\x1b\[K//' >"$W/cmp.err.program"
  cmp -s "$W/bare.err" "$W/cmp.err.program" || fail "case $i: stderr differs from the bare run: $(diff "$W/bare.err" "$W/cmp.err.program" | head -5)"
  [ "$(grep -c 'report written' "$W/cmp.err")" = 2 ] || fail "case $i: $(grep -c 'report written' "$W/cmp.err") 'report written' lines, expected the two roots'"
  off_total=$(grep '^logical allocations  ' "$W/cmp.out" | awk '{gsub(",", "", $3); print $3}')
  [ "$off_total" = "$(sum_logical "$W/reports/off"/off.json*)" ] ||
    fail "case $i: the tree's logical allocations $off_total are not the sum of its reports $(sum_logical "$W/reports/off"/off.json*)"
  echo "case $i: $(ls "$W/reports/off"/off.json* | wc -l) processes, $off_total logical allocations (pooling off): $cmd" | head -1
done
grep -q ' /usr/bin/make (root)\| .*/make ' "$T/case1/cmp.out" && grep -q '/cc1 ' "$T/case1/cmp.out" || fail "make: the table lacks make or cc1: $(cat "$T/case1/cmp.out")"
grep -q 'python3[.0-9]* ' "$T/case3/cmp.out" || fail "python3 in PATH: the table names no python3 interpreter"

if [ "$failures" -ne 0 ]; then
  echo "$failures failed" >&2
  exit 1
fi
echo "tree_real_test: all passed"
