#!/bin/bash
# scripts/install.sh's layout works: installed into a temporary PREFIX from the built files (the same
# install step `scripts/install.sh PREFIX` runs after building), with only PREFIX/bin added to PATH
# and no runfiles in the environment, `poolscope` run from an arbitrary folder with relative paths
# preloads PREFIX/lib/libpoolscope.so into ./prog, writes r.json there, and `report r.json`, the
# summary's suggested command run as printed, `diff a.json b.json` and `compare` (the installed demo)
# all succeed and name the right program. Then what `bazel run` does: started in another folder with
# BUILD_WORKING_DIRECTORY naming the caller's, `run -o rr.json -- ./prog` and `report rr.json` resolve
# against the caller's folder.
# Args: INSTALL_SH POOLSCOPE LIBPOOLSCOPE DEMO_WORKLOAD PROG
set -euo pipefail
install_sh=$(readlink -f "$1"); poolscope=$(readlink -f "$2"); lib=$(readlink -f "$3")
demo=$(readlink -f "$4"); prog=$(readlink -f "$5")
work=${TEST_TMPDIR:-$(mktemp -d)}/install
rm -rf "$work"; mkdir -p "$work"
prefix=$work/prefix
fail=0
check() {  # check DESCRIPTION COMMAND...: the command must succeed
  local what=$1; shift
  if "$@"; then echo "ok: $what"; else echo "FAIL: $what"; fail=1; fi
}

bash "$install_sh" --files "$poolscope" "$lib" "$demo" "$prefix" > "$work/install.log"
for f in bin/poolscope lib/libpoolscope.so lib/poolscope/demo_workload; do
  [ -f "$prefix/$f" ] || { echo "FAIL: $prefix/$f was not installed"; exit 1; }
done
[ -x "$prefix/bin/poolscope" ] || { echo "FAIL: $prefix/bin/poolscope is not executable"; exit 1; }
# A bad call is one line and status 2.
status=0; bash "$install_sh" > "$work/usage.txt" 2>&1 || status=$?
check "install.sh with no prefix: status 2, one line" [ "$status" = 2 -a "$(wc -l < "$work/usage.txt")" = 1 ]

# The environment a user has: PREFIX/bin on PATH, nothing of Bazel's.
user_env=(env -u RUNFILES_DIR -u RUNFILES_MANIFEST_FILE -u JAVA_RUNFILES -u TEST_SRCDIR
          -u POOLSCOPE_LIB -u BUILD_WORKING_DIRECTORY PATH="$prefix/bin:/usr/bin:/bin")
here=$work/somewhere/else
mkdir -p "$here"
cp "$prog" "$here/prog"
cd "$here"

# run: ./prog found, r.json written here; the child maps the installed library.
"${user_env[@]}" poolscope run -o r.json -- ./prog list > run.out 2> run.err || true
check "run -o r.json -- ./prog: the program ran" grep -q "^leak_shapes: list done" run.out
check "run wrote r.json in the caller's folder" [ -s "$here/r.json" ]
"${user_env[@]}" poolscope run -o maps.json -- /bin/cat /proc/self/maps > maps.out 2> /dev/null || true
check "the child preloads PREFIX/lib/libpoolscope.so" grep -q " $prefix/lib/libpoolscope.so\$" maps.out

# report: relative path; names the program.
status=0; "${user_env[@]}" poolscope report r.json > report.out 2> report.err || status=$?
check "report r.json: exit 0" [ "$status" = 0 ]
check "report names r.json" grep -q "^poolscope report r.json\$" report.out
check "report names the program $here/prog" grep -qE "^process .* $here/prog\$" report.out

# The summary's suggested command, run exactly as printed.
suggested=$(sed -n 's/^poolscope: details: //p' run.err)
check "run suggests a command" [ -n "$suggested" ]
status=1; [ -z "$suggested" ] || { status=0; "${user_env[@]}" bash -c "$suggested" > suggested.out 2>&1 || status=$?; }
check "the suggested command ($suggested) works as printed" [ "$status" = 0 ]
check "the suggested command names the program" grep -qE "^process .* $here/prog\$" suggested.out

# diff: two relative reports.
"${user_env[@]}" poolscope run --pool=off -o a.json -- ./prog interleaved > /dev/null 2>&1 || true
"${user_env[@]}" poolscope run --pool=on -o b.json -- ./prog interleaved > /dev/null 2>&1 || true
status=0; "${user_env[@]}" poolscope diff a.json b.json > diff.out 2> diff.err || status=$?
check "diff a.json b.json: exit 0" [ "$status" = 0 ]
check "diff names both reports" grep -q "^poolscope diff: A = a.json, B = b.json\$" diff.out
for r in a b; do
  /usr/bin/python3 -c 'import json, sys; sys.exit(json.load(open(sys.argv[1]))["process"]["exe"] != sys.argv[2])' \
    "$r.json" "$here/prog" 2> /dev/null || { echo "FAIL: $r.json is not a report of $here/prog"; fail=1; }
done

# compare with no command: the installed demo (its reports kept, to be read below).
status=0; "${user_env[@]}" poolscope compare --keep > compare.out 2> compare.err || status=$?
check "compare (the demo): exit 0" [ "$status" = 0 ]
check "compare names the demo by its name" grep -q "^poolscope compare: demo_workload\$" compare.out
# The demo it ran is the installed one: its report names the executable.
off_report=$(sed -n 's/^reports: \(.*\) (off), .*/\1/p' compare.out)
check "compare runs the installed demo" grep -q "\"exe\": \"$prefix/lib/poolscope/demo_workload\"" "$off_report"

# As under `bazel run`: started elsewhere, BUILD_WORKING_DIRECTORY names the caller's folder.
cd /
env -u RUNFILES_DIR -u POOLSCOPE_LIB BUILD_WORKING_DIRECTORY="$here" "$prefix/bin/poolscope" \
  run -o rr.json -- ./prog global > "$work/bwd_run.out" 2> "$work/bwd_run.err" || true
check "BUILD_WORKING_DIRECTORY: run -o rr.json -- ./prog ran ./prog" grep -q "^leak_shapes: global done" "$work/bwd_run.out"
check "BUILD_WORKING_DIRECTORY: rr.json written in the caller's folder" [ -s "$here/rr.json" ]
status=0; env BUILD_WORKING_DIRECTORY="$here" "$prefix/bin/poolscope" report rr.json > "$work/bwd_report.out" 2>&1 || status=$?
check "BUILD_WORKING_DIRECTORY: report rr.json: exit 0" [ "$status" = 0 ]
check "BUILD_WORKING_DIRECTORY: report names the program" grep -qE "^process .* $here/prog\$" "$work/bwd_report.out"
status=0; env BUILD_WORKING_DIRECTORY="$work/missing" "$prefix/bin/poolscope" report rr.json > "$work/bwd_bad.out" 2>&1 || status=$?
check "BUILD_WORKING_DIRECTORY missing: status 2, one line" [ "$status" = 2 -a "$(wc -l < "$work/bwd_bad.out")" = 1 ]

[ "$fail" -eq 0 ] || exit 1
echo PASS
