#!/bin/bash
# File: tests/tools/tree_test.sh
#
# Process trees with the real preload library. `compare -- sh -c 'A && B | C'`, where A, B and C make
# exactly 1000, 2000 and 3000 allocations (tests/tools/allocs_known.c; tree_prog_0 makes none and
# gives what the C runtime adds): the tree's logical allocations equal the sum of every report in
# the folder, the table names A, B and C, `--process='*B'` gives B's figures exactly, and only the
# root prints "report written". Each report names root_pid and parent_pid, and its run (process.run,
# one per run). Each run's reports are in a folder of its own (compare: DIR/off and DIR/on; run -o
# out/mk.json: out/mk, beside the user's files, the root's report linked in). `run` summarises the
# tree and `--no-children` keeps the root; a process preloaded by hand prints its own line as
# before; `report` and `diff` read a run's folder as its whole tree; a folder that holds several
# runs' reports is refused with one line naming them; bad folders give one line and exit 2, or a
# warning when some reports are fine.
set -u
POOLSCOPE="$PWD/tools/poolscope"
DIR="$PWD/tests/tools"
LIB="$PWD/interpose/libpoolscope.so"
PY=/usr/bin/python3
T="$(mktemp -d "${TEST_TMPDIR:-/tmp}/tree_test.XXXXXX")"
export TMPDIR="$T"
unset POOLSCOPE_LIB POOLSCOPE_OPTIONS POOLSCOPE_ROOT_PID
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
check_rc() { [ "$1" = "$2" ] || fail "$3: exit status $1, expected $2"; }
# field FILE a.b.c: the value at a dotted path of a JSON report ("None" for null).
field() { "$PY" -c 'import json,sys
v=json.load(open(sys.argv[1]))
for k in sys.argv[2].split("."): v=v[k]
print(v)' "$1" "$2"; }
# sum_logical FILES...: logical.allocs added over the files.
sum_logical() { "$PY" -c 'import json,sys
print(sum(json.load(open(f))["logical"]["allocs"] for f in sys.argv[1:]))' "$@"; }
# row OUTPUT NAME COLUMN: the COLUMN-th (1-based) field of the table row whose executable ends in NAME,
# thousands separators removed.
row() { awk -v n="$2" -v c="$3" '$3 ~ n"$" {gsub(",", "", $c); print $c; exit}' "$1"; }
# total OUTPUT LABEL COLUMN: a figure of the ledger table (2 pooling off, 3 pooling on).
total() { grep "^$2  " "$1" | sed "s/^$2 *//" | awk -v c="$(($3 - 1))" '{gsub(",", "", $c); print $c}'; }

A="$DIR/tree_prog_A"; B="$DIR/tree_prog_B"; C="$DIR/tree_prog_C"; ZERO="$DIR/tree_prog_0"
for f in "$POOLSCOPE" "$LIB" "$A" "$B" "$C" "$ZERO"; do [ -e "$f" ] || { echo "FAIL: $f missing" >&2; exit 1; }; done

# What the C runtime allocates in these programs on its own: tree_prog_0's count.
"$POOLSCOPE" run --pool=off -o "$T/zero.json" -- "$ZERO" </dev/null 2>"$T/zero.err"
check_rc $? 0 "run tree_prog_0"
base=$(field "$T/zero.json" logical.allocs)
[ -n "$base" ] && [ "$base" -ge 0 ] && [ "$base" -lt 100 ] || fail "tree_prog_0 made $base allocations"

# 1. compare over sh -c 'A && B | C'.
mkdir "$T/cmp"
"$POOLSCOPE" compare --report-dir="$T/cmp" -- /bin/sh -c "$A </dev/null && $B </dev/null | $C" \
  >"$T/cmp.out" 2>"$T/cmp.err"
check_rc $? 0 "compare sh -c 'A && B | C'"
off_files=("$T/cmp/off/off.json" "$T/cmp/off"/off.json.[0-9]*)
on_files=("$T/cmp/on/on.json" "$T/cmp/on"/on.json.[0-9]*)
# Each run's reports in its own folder, nothing else of theirs beside them.
[ "$(cd "$T/cmp" && echo *)" = "off off.stdout on on.stdout" ] || fail "compare's folder holds: $(ls "$T/cmp")"
[ "$(ls "$T/cmp/off" | wc -l)" = 4 ] && [ "$(ls "$T/cmp/on" | wc -l)" = 4 ] ||
  fail "the runs' folders hold more than their reports: $(ls "$T/cmp/off" "$T/cmp/on")"
grep -qxF "reports: $T/cmp/off (4 processes, pooling off), $T/cmp/on (4 processes, pooling on); kept: poolscope diff $T/cmp/off $T/cmp/on" "$T/cmp.out" ||
  fail "the reports' line: $(grep '^reports' "$T/cmp.out")"
# One run per folder, named alike in every report of it, another in the other folder.
runs() { for f in "$@"; do field "$f" process.run; done | sort -u; }
[ "$(runs "${off_files[@]}" | wc -l)" = 1 ] && [ "$(runs "${on_files[@]}" | wc -l)" = 1 ] ||
  fail "reports of one run name different runs: $(runs "${off_files[@]}") / $(runs "${on_files[@]}")"
[ "$(runs "${off_files[@]}")" != "$(runs "${on_files[@]}")" ] || fail "the two runs have one name: $(runs "${off_files[@]}")"
[[ "$(runs "${off_files[@]}")" == "$(field "$T/cmp/off/off.json" process.pid)-"* ]] ||
  fail "process.run $(runs "${off_files[@]}") does not start with the root's pid"
[ "${#off_files[@]}" = 4 ] || fail "pooling off: ${#off_files[@]} reports, expected 4 (sh, A, B, C)"
[ "${#on_files[@]}" = 4 ] || fail "pooling on: ${#on_files[@]} reports, expected 4"
[ "$(total "$T/cmp.out" 'logical allocations' 2)" = "$(sum_logical "${off_files[@]}")" ] ||
  fail "tree total (off) $(total "$T/cmp.out" 'logical allocations' 2) != sum of the reports $(sum_logical "${off_files[@]}")"
[ "$(total "$T/cmp.out" 'logical allocations' 3)" = "$(sum_logical "${on_files[@]}")" ] ||
  fail "tree total (on) != sum of the reports"
for p in A:1000 B:2000 C:3000; do
  name=${p%:*}; n=${p#*:}
  got=$(row "$T/cmp.out" "tree_prog_$name" 4)
  [ "$got" = $((base + n)) ] || fail "table row of $name: logical off '$got', expected $((base + n))"
  got=$(row "$T/cmp.out" "tree_prog_$name" 5)
  [ "$got" = $((base + n)) ] || fail "table row of $name: logical on '$got', expected $((base + n))"
done
grep -q '/bin/dash (root)\|/bin/sh (root)\|/bin/bash (root)' "$T/cmp.out" || fail "the root is not marked: $(cat "$T/cmp.out")"
# Peak RSS of a tree: the largest process's and the sum over the processes, each row with poolscope's
# own memory of the same scope (the sum's is the sum of the reports' internal.peak_resident_bytes).
"$PY" - "$T/cmp.out" "${on_files[@]}" <<'PY' || fail "tree peak RSS rows: $(grep -A4 'peak RSS' "$T/cmp.out")"
import json, re, sys
out = open(sys.argv[1]).read()
reports = [json.load(open(f)) for f in sys.argv[2:]]
def cell(label, column):  # the table's cell, in KiB
    line = next(l for l in out.splitlines() if l.startswith(label + "  "))
    value, unit = re.findall(r"([\d.]+) (B|KiB|MiB|GiB)", line)[column]
    return float(value) * {"B": 1 / 1024, "KiB": 1, "MiB": 1024, "GiB": 1024 * 1024}[unit]
rss = [r["process"]["max_rss_kib"] for r in reports]
largest = reports[rss.index(max(rss))]
own_sum = sum(r["internal"]["peak_resident_bytes"] for r in reports) / 1024
checks = [("peak RSS (largest process)", max(rss)), ("peak RSS (sum over processes)", sum(rss)),
          ("  of which poolscope's own memory (sum)", own_sum)]
lines = out.splitlines()
own_of_largest = lines[[l.startswith("peak RSS (largest process)  ") for l in lines].index(True) + 1]
assert own_of_largest.startswith("  of which poolscope's own memory (peak)  "), own_of_largest
checks.append(("  of which poolscope's own memory (peak)", largest["internal"]["peak_resident_bytes"] / 1024))
for label, want in checks:
    got = cell(label, 1)
    assert abs(got - want) <= max(0.06 * want, 1), f"{label}: {got} KiB, the reports give {want}"
PY
[ "$(grep -c 'report written' "$T/cmp.err")" = 2 ] ||
  fail "expected one 'report written' line per run (the roots'), got: $(grep 'report written' "$T/cmp.err")"
# Each report names the root and its parent.
root_off=$(field "$T/cmp/off/off.json" process.pid)
[ "$(field "$T/cmp/off/off.json" process.root_pid)" = "$root_off" ] || fail "the root's root_pid is not its pid"
[ "$(field "$T/cmp/off/off.json" process.parent_pid)" = None ] || fail "the root has a parent_pid"
for f in "$T/cmp/off"/off.json.[0-9]*; do
  [ "$(field "$f" process.root_pid)" = "$root_off" ] || fail "$f: root_pid is not $root_off"
  [ "$(field "$f" process.parent_pid)" = "$root_off" ] || fail "$f: parent_pid is not the shell's pid $root_off"
  "$POOLSCOPE" check "$f" >/dev/null || fail "$f: check failed: $("$POOLSCOPE" check "$f")"
done

# The runs' folders as they are, for what follows (the next compare writes over them).
cp -r "$T/cmp/off" "$T/off"
cp -r "$T/cmp/on" "$T/on"

# 2. --process='*B': B's figures exactly.
"$POOLSCOPE" compare --report-dir="$T/cmp" --process='*B' -- /bin/sh -c "$A </dev/null && $B </dev/null | $C" \
  >"$T/cmpb.out" 2>"$T/cmpb.err"
check_rc $? 0 "compare --process='*B'"
b_off=$(for f in "$T/cmp/off"/off.json*; do [ "$(basename "$(field "$f" process.exe)")" = tree_prog_B ] && echo "$f"; done)
[ -n "$b_off" ] || fail "no report of B"
[ "$(total "$T/cmpb.out" 'logical allocations' 2)" = $((base + 2000)) ] ||
  fail "--process='*B' logical (off): $(total "$T/cmpb.out" 'logical allocations' 2), expected $((base + 2000))"
[ "$(total "$T/cmpb.out" 'logical allocations' 3)" = $((base + 2000)) ] || fail "--process='*B' logical (on)"
[ "$(total "$T/cmpb.out" 'real allocations' 2)" = "$(field "$b_off" real.allocs)" ] || fail "--process='*B' real allocations (off)"
[ "$(total "$T/cmpb.out" 'pool hits' 3)" -ge 2000 ] || fail "--process='*B' pool hits (on): $(total "$T/cmpb.out" 'pool hits' 3)"
[ -z "$(row "$T/cmpb.out" tree_prog_A 4)" ] || fail "--process='*B' lists A in its table"
"$POOLSCOPE" compare --report-dir="$T/cmp" --process='nothing*' -- /bin/sh -c "$A </dev/null" >/dev/null 2>"$T/none.err"
check_rc $? 2 "compare --process matching nothing"

# 3. run: the tree on stderr; --no-children keeps the root.
mkdir -p "$T/run"
"$POOLSCOPE" run --pool=off -o "$T/run/r.json" -- /bin/sh -c "$A </dev/null; $C </dev/null" >"$T/run.out" 2>"$T/run.err"
check_rc $? 0 "run of a tree"
[ ! -s "$T/run.out" ] || fail "run wrote on stdout"
grep -q '3 reports of the process tree' "$T/run.err" || fail "run: $(cat "$T/run.err")"
grep -q "tree_prog_A" "$T/run.err" && grep -q "tree_prog_C" "$T/run.err" || fail "run's table lacks A or C"
[ "$(grep -c 'report written' "$T/run.err")" = 1 ] || fail "run: 'report written' lines: $(grep -c 'report written' "$T/run.err")"
logical=$(sed -n 's/^poolscope: \([0-9,]*\) logical allocations.*/\1/p' "$T/run.err" | tr -d ,)
[ "$logical" = "$(sum_logical "$T/run/r"/r.json*)" ] || fail "run's total $logical != sum of its reports"
"$POOLSCOPE" run --pool=off --no-children -o "$T/run/r.json" -- /bin/sh -c "$A </dev/null; $C </dev/null" >/dev/null 2>"$T/runr.err"
logical=$(sed -n 's/^poolscope: \([0-9,]*\) logical allocations.*/\1/p' "$T/runr.err" | tr -d ,)
[ "$logical" = "$(field "$T/run/r.json" logical.allocs)" ] || fail "--no-children: $logical is not the root's figure"

# 3b. Processes without a report are listed with the reason: one killed by SIGKILL, one still
#     running when the root ended; the root marks nothing of its own.
mkdir -p "$T/gone"
"$POOLSCOPE" run --pool=off -o "$T/gone/r.json" -- /bin/sh -c "$A </dev/null; /bin/sh -c 'kill -9 \$\$'; /bin/sh -c 'kill -TERM \$\$'; (exec sleep 3 >/dev/null 2>&1 </dev/null &); true" \
  >/dev/null 2>"$T/gone.err"
check_rc $? 0 "run of a tree with a killed and a lingering process"
grep -q '^poolscope: without a report:$' "$T/gone.err" || fail "no list of processes without a report: $(cat "$T/gone.err")"
grep -q '^poolscope:   pid [0-9]* (parent [0-9]*): .*sh: no report: it ended without writing one' "$T/gone.err" ||
  fail "the killed shell is not listed: $(cat "$T/gone.err")"
grep -q '^poolscope:   pid [0-9]* (parent [0-9]*): .*/sleep: still running when the root ended$' "$T/gone.err" ||
  fail "the running sleep is not listed: $(cat "$T/gone.err")"
grep -q '^poolscope: .* /.*sh \[killed by SIGTERM\] ' "$T/gone.err" || fail "the shell ended by SIGTERM is not marked: $(cat "$T/gone.err")"
ls -a "$T/gone" "$T/gone/r" | grep -q '^\.poolscope-started' && fail "start markers left behind: $(ls -a "$T/gone" "$T/gone/r")"

# 3c. run -o out/mk.json of a tree, in a folder of the user's own: the root's report at out/mk.json, the
#     run's reports (the root's linked in) in out/mk and nowhere else; `report out/mk` is the whole tree;
#     `report out` the root alone, with a note naming the tree's folder. Another run beside it
#     (out/other.json): `report out` refuses, naming both runs. A single process run again at
#     out/mk.json leaves mk.json alone, no folder.
mkdir -p "$T/out"
echo mine >"$T/out/notes.txt"
"$POOLSCOPE" run --pool=off -o "$T/out/mk.json" -- /bin/sh -c "$A </dev/null; $C </dev/null" >/dev/null 2>"$T/mk.err"
check_rc $? 0 "run -o out/mk.json of a tree"
[ "$(ls -A "$T/out" | tr '\n' ' ')" = "mk mk.json notes.txt " ] || fail "out/ holds: $(ls -A "$T/out")"
[ "$(ls -A "$T/out/mk" | wc -l)" = 3 ] || fail "out/mk holds: $(ls -A "$T/out/mk")"
cmp -s "$T/out/mk.json" "$T/out/mk/mk.json" || fail "the root's report is not in out/mk: $(ls -A "$T/out/mk")"
grep -qxF "poolscope: exit 0; 3 reports of the process tree in $T/out/mk" "$T/mk.err" || fail "run -o out/mk.json: $(cat "$T/mk.err")"
grep -qxF "poolscope: details: poolscope report $T/out/mk" "$T/mk.err" || fail "run -o out/mk.json: $(cat "$T/mk.err")"
"$POOLSCOPE" report "$T/out/mk" >"$T/mk.rep" 2>"$T/mk.rep.err"
check_rc $? 0 "report out/mk"
grep -q 'process tree of .*: 3 processes, 3 with a report' "$T/mk.rep" || fail "report out/mk: $(head -3 "$T/mk.rep")"
"$POOLSCOPE" report "$T/out" >"$T/out.rep" 2>"$T/out.rep.err"
check_rc $? 0 "report out, the root's report alone"
grep -q 'process tree of .*: 1 process, 1 with a report' "$T/out.rep" || fail "report out: $(head -3 "$T/out.rep")"
grep -qxF "poolscope: note: $T/out/mk.json is the root process of a run whose reports are in $T/out/mk: poolscope report $T/out/mk shows the whole tree" \
  "$T/out.rep.err" || fail "report out: no note naming the tree: $(cat "$T/out.rep.err")"
root_mk=$(field "$T/out/mk.json" process.pid)
"$POOLSCOPE" run --pool=off -o "$T/out/other.json" -- "$B" </dev/null >/dev/null 2>&1
root_other=$(field "$T/out/other.json" process.pid)
"$POOLSCOPE" report "$T/out" >"$T/out2.rep" 2>"$T/out2.err"
check_rc $? 2 "report of a folder with two runs' reports"
[ "$(wc -l <"$T/out2.err")" = 1 ] && grep -q "^poolscope: $T/out: the reports of 2 runs, which are never merged: .*sh (root pid $root_mk, started [0-9:]*), tree_prog_B (root pid $root_other, started [0-9:]*); give the folder of one run$" \
  "$T/out2.err" || fail "two runs in out/: $(cat "$T/out2.err")"
[ ! -s "$T/out2.rep" ] || fail "report rendered two runs' reports: $(head -3 "$T/out2.rep")"
"$POOLSCOPE" run --pool=off -o "$T/out/mk.json" -- "$B" </dev/null >/dev/null 2>"$T/mk1.err"
[ ! -e "$T/out/mk" ] || fail "a single process's run left the earlier run's folder: $(ls -A "$T/out/mk")"
grep -qxF "poolscope: details: poolscope report $T/out/mk.json" "$T/mk1.err" || fail "single process: $(cat "$T/mk1.err")"

# 3d. A template with %p: the run's folder is named by the root's pid, like the root's report.
mkdir "$T/tpl"
"$POOLSCOPE" run --pool=off -o "$T/tpl/r.%p.json" -- /bin/sh -c "$A </dev/null; $C </dev/null" >/dev/null 2>"$T/tpl.err"
check_rc $? 0 "run -o r.%p.json of a tree"
tpl_root=$(ls "$T/tpl"/r.*.json)
tpl_pid=$(field "$tpl_root" process.pid)
[ "$(ls -A "$T/tpl" | tr '\n' ' ')" = "r.$tpl_pid r.$tpl_pid.json " ] || fail "tpl/ holds: $(ls -A "$T/tpl")"
[ "$(ls "$T/tpl/r.$tpl_pid"/r.*.json | wc -l)" = 3 ] || fail "tpl/r.$tpl_pid holds: $(ls -A "$T/tpl/r.$tpl_pid")"
grep -qxF "poolscope: details: poolscope report $T/tpl/r.$tpl_pid" "$T/tpl.err" || fail "template: $(cat "$T/tpl.err")"

# 4. Preloaded by hand: every process says where its report went, and names no root.
mkdir "$T/hand"
LD_PRELOAD="$LIB" POOLSCOPE_OPTIONS="pool=0:report=$T/hand/h.%p.json" /bin/sh -c "$A </dev/null; $B </dev/null" 2>"$T/hand.err"
[ "$(grep -c 'report written' "$T/hand.err")" = 3 ] || fail "by hand: $(cat "$T/hand.err")"
for f in "$T/hand"/h.*.json; do
  [ "$(field "$f" process.root_pid)" = None ] || fail "$f: root_pid without poolscope"
done

# 5. report and diff of folders.
"$POOLSCOPE" report "$T/off" >"$T/rep.out" 2>"$T/rep.err"
check_rc $? 0 "report FOLDER"
grep -q 'process tree of .*: 4 processes, 4 with a report' "$T/rep.out" || fail "report FOLDER: $(head -3 "$T/rep.out")"
[ "$(grep -c '^pid [0-9]*: ' "$T/rep.out")" = 4 ] || fail "report FOLDER: not one page per process"
"$POOLSCOPE" report --format=html "$T/off" >"$T/rep.html"
[ "$(grep -c '<section id="process-' "$T/rep.html")" = 4 ] || fail "html of a tree: not one section per process"
"$POOLSCOPE" report "$T/off/off.json" >"$T/one.out" 2>"$T/one.err"
grep -q 'process tree' "$T/one.out" && fail "report of one file shows a tree"
"$POOLSCOPE" diff "$T/off" "$T/on" >"$T/diff.out" 2>"$T/diff.err"
check_rc $? 0 "diff FOLDER FOLDER"
[ "$(total "$T/diff.out" 'logical allocations' 2)" = "$(sum_logical "$T/off"/*)" ] || fail "diff of folders: totals"
[ "$(total "$T/diff.out" 'logical allocations' 3)" = "$(sum_logical "$T/on"/*)" ] || fail "diff of folders: totals (B)"
[ "$(row "$T/diff.out" tree_prog_B 4)" = $((base + 2000)) ] || fail "diff of folders: B's row"
# Of the two roots' files: those two reports, and a note naming the trees' folders.
"$POOLSCOPE" diff "$T/off/off.json" "$T/on/on.json" >"$T/diffr.out" 2>"$T/diffr.err"
check_rc $? 0 "diff of two roots' reports"
grep -qxF "poolscope: diff: note: A and B are the root processes of runs whose reports are in $T/off and $T/on: poolscope diff $T/off $T/on compares the whole trees" \
  "$T/diffr.err" || fail "diff of roots: no note: $(cat "$T/diffr.err")"

# 5b. Never two runs' reports in one tree: compare's folder (off/ and on/), a folder holding both
#     runs' reports, two files of two runs: one line naming them, status 2, nothing rendered.
"$POOLSCOPE" report "$T/cmp" >"$T/rc.out" 2>"$T/rc.err"
check_rc $? 2 "report of compare's folder"
[ "$(cat "$T/rc.err")" = "poolscope: $T/cmp: no reports here, but 2 folders of runs' reports, which are never merged: $T/cmp/off, $T/cmp/on; give one of them" ] ||
  fail "report of compare's folder: $(cat "$T/rc.err")"
[ ! -s "$T/rc.out" ] || fail "report of compare's folder rendered something"
root_on=$(field "$T/on/on.json" process.pid)
mkdir "$T/both"
cp "$T/off"/* "$T/on"/* "$T/both/"
for cmd in "report $T/both" "diff $T/both $T/on" "report $T/off/off.json $T/on/on.json"; do
  # shellcheck disable=SC2086
  "$POOLSCOPE" $cmd >"$T/both.out" 2>"$T/both.err"
  check_rc $? 2 "$cmd"
  [ "$(wc -l <"$T/both.err")" = 1 ] && grep -q "^poolscope: .*: the reports of 2 runs, which are never merged: .*sh (root pid $root_off, started [0-9:]*), .*sh (root pid $root_on, started [0-9:]*); give the folder of one run$" \
    "$T/both.err" || fail "$cmd: $(cat "$T/both.err")"
  [ ! -s "$T/both.out" ] || fail "$cmd rendered two runs: $(head -3 "$T/both.out")"
done

# 6. Bad folders.
mkdir "$T/empty" "$T/bad" "$T/mixed"
"$POOLSCOPE" report "$T/empty" >"$T/e.out" 2>"$T/e.err"
check_rc $? 2 "report of an empty folder"
[ "$(wc -l <"$T/e.err")" = 1 ] && grep -q "^poolscope: $T/empty: no reports" "$T/e.err" || fail "empty folder: $(cat "$T/e.err")"
echo '{"schema": "someone.else/3", "process": {}}' >"$T/bad/other.json"
"$POOLSCOPE" report "$T/bad" >"$T/b.out" 2>"$T/b.err"
check_rc $? 2 "report of a folder with a foreign report"
[ "$(wc -l <"$T/b.err")" = 1 ] && grep -q "^poolscope: $T/bad/other.json: .*schema" "$T/b.err" || fail "foreign schema: $(cat "$T/b.err")"
rm "$T/bad/other.json"
head -c 700 "$T/off/off.json" >"$T/bad/cut.json"
"$POOLSCOPE" report "$T/bad" >"$T/c.out" 2>"$T/c.err"
check_rc $? 2 "report of a folder with a truncated report"
[ "$(wc -l <"$T/c.err")" = 1 ] && grep -q "^poolscope: $T/bad/cut.json: truncated" "$T/c.err" || fail "truncated: $(cat "$T/c.err")"
cp "$T/off"/* "$T/mixed/"
head -c 700 "$T/off/off.json" >"$T/mixed/cut.json"
"$POOLSCOPE" report "$T/mixed" >"$T/m.out" 2>"$T/m.err"
check_rc $? 0 "report of a folder with one bad report among good ones"
grep -q "^poolscope: warning: $T/mixed/cut.json: truncated" "$T/m.err" || fail "no warning naming the bad file: $(cat "$T/m.err")"
grep -q '4 processes, 4 with a report' "$T/m.out" || fail "the good reports were not rendered"
# 7. The identities are checked per report: one whose ledger does not balance is named.
mkdir "$T/broken"
cp "$T/off"/* "$T/broken/"
victim=$(ls "$T/broken"/off.json.* | head -1)
"$PY" -c 'import json,sys
d=json.load(open(sys.argv[1])); d["logical"]["allocs"] += 1
json.dump(d, open(sys.argv[1], "w"))' "$victim"
"$POOLSCOPE" report "$T/broken" >/dev/null 2>"$T/broken.err"
check_rc $? 0 "report of a folder with a report that breaks an identity"
grep -q "^poolscope: warning: $victim: logical.allocs - logical.frees = " "$T/broken.err" ||
  fail "the broken report is not named: $(cat "$T/broken.err")"
[ "$(wc -l <"$T/broken.err")" = 1 ] || fail "warnings for sound reports: $(cat "$T/broken.err")"

if [ "$failures" -ne 0 ]; then
  echo "$failures failed" >&2
  exit 1
fi
echo "tree_test: all passed"
