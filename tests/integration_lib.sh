# File: tests/integration_lib.sh
#
# Shared by the integration tests (tests/*_integration_test.sh). Sourced, not run. Runs a real
# process bare, then with libpoolscope.so preloaded (pool=0 and pool=1), and checks that poolscope
# changed nothing the process shows (stdout bytes, stderr bytes, exit status) and that every report
# it wrote is complete and balanced (tests/check_report.py).
#
# The caller sets, before sourcing:  nothing. It calls `integration_init LIB CHECKER` first with the
# runfiles paths of //interpose:libpoolscope.so and //tests:check_report.py.
#
# Layout of one run: $WORK/<name>/<mode>/{stdout,stderr,status,reports/r.<pid>.json}
#   mode: bare | pool0 | pool1 (or any name with `run_with_options`).

set -u

PY=/usr/bin/python3
RUN_TIMEOUT=${POOLSCOPE_RUN_TIMEOUT:-120}  # seconds per process run; a hang fails, with a message

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

note() {
  echo "--- $*"
}

abspath() {
  readlink -f -- "$1" || fail "no such file: $1"
}

integration_init() {
  [ $# -ge 2 ] || fail "integration_init LIB CHECKER"
  LIB=$(abspath "$1")
  CHECKER=$(abspath "$2")
  [ -f "$LIB" ] || fail "the preload library is missing: $1"
  [ -f "$CHECKER" ] || fail "the checker is missing: $2"
  [ -x "$PY" ] || fail "$PY is required"
  WORK=${TEST_TMPDIR:-$(mktemp -d)}/runs
  mkdir -p "$WORK"
  note "library: $LIB"
}

# run_with_options NAME MODE OPTIONS STDIN [VAR=VALUE ...] -- CMD [ARGS...]
#   OPTIONS "-" runs bare (no LD_PRELOAD, no POOLSCOPE_OPTIONS). Otherwise LD_PRELOAD=$LIB and
#   POOLSCOPE_OPTIONS=OPTIONS, where the token @REPORT@ is replaced by $dir/reports/r.%p.json.
#   The process runs in $WORK/NAME/MODE with STDIN as its standard input (a file, or /dev/null).
run_with_options() {
  local name=$1 mode=$2 options=$3 stdin=$4
  shift 4
  local -a vars=()
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do
    vars+=("$1")
    shift
  done
  [ "${1:-}" = "--" ] || fail "run_with_options: missing -- before the command"
  shift
  local dir=$WORK/$name/$mode
  rm -rf "$dir"
  mkdir -p "$dir/reports"
  local -a preload=(-u LD_PRELOAD -u POOLSCOPE_OPTIONS)
  if [ "$options" != "-" ]; then
    preload=(LD_PRELOAD="$LIB" POOLSCOPE_OPTIONS="${options//@REPORT@/$dir/reports/r.%p.json}")
  fi
  local status=0
  (cd "$dir" && exec timeout -k 5 "$RUN_TIMEOUT" env "${preload[@]}" "${vars[@]}" "$@" \
      <"$stdin" >"$dir/stdout" 2>"$dir/stderr") || status=$?
  echo "$status" >"$dir/status"
  if [ "$status" = 124 ] || [ "$status" = 137 ]; then
    echo "stderr of the run:" >&2
    head -c 4000 "$dir/stderr" >&2
    fail "$name/$mode: timed out after ${RUN_TIMEOUT}s (a hang or deadlock): $*"
  fi
  note "$name/$mode: exit status $status, $(wc -c <"$dir/stdout") bytes of stdout, $(ls "$dir/reports" | wc -l) report(s)"
}

# run_three NAME STDIN [VAR=VALUE ...] -- CMD [ARGS...]: the bare run, pool=0 and pool=1 (quiet=1).
run_three() {
  local name=$1 stdin=$2
  shift 2
  run_with_options "$name" bare - "$stdin" "$@"
  run_with_options "$name" pool0 "pool=0:quiet=1:report=@REPORT@" "$stdin" "$@"
  run_with_options "$name" pool1 "pool=1:quiet=1:report=@REPORT@" "$stdin" "$@"
}

# same_as_bare NAME MODE: stdout and stderr byte-identical to the bare run, same exit status.
same_as_bare() {
  local name=$1 mode=$2
  local bare=$WORK/$name/bare run=$WORK/$name/$mode
  if ! cmp -s "$bare/stdout" "$run/stdout" || [ "$(cat "$bare/status")" != "$(cat "$run/status")" ]; then
    echo "exit status: bare $(cat "$bare/status"), $mode $(cat "$run/status"); stderr of the $mode run:" >&2
    head -c 3000 "$run/stderr" | sed 's/^/  | /' >&2
  fi
  if ! cmp -s "$bare/stdout" "$run/stdout"; then
    echo "diff of stdout, bare (-) against $mode (+):" >&2
    diff -u "$bare/stdout" "$run/stdout" | head -40 >&2
    fail "$name/$mode: stdout differs from the bare run"
  fi
  if ! cmp -s "$bare/stderr" "$run/stderr"; then
    echo "diff of stderr, bare (-) against $mode (+):" >&2
    diff -u "$bare/stderr" "$run/stderr" | head -40 >&2
    fail "$name/$mode: stderr differs from the bare run (quiet=1 must write nothing)"
  fi
  local sb sr
  sb=$(cat "$bare/status")
  sr=$(cat "$run/status")
  [ "$sb" = "$sr" ] || fail "$name/$mode: exit status $sr, the bare run's was $sb"
}

# reports_ok NAME MODE POOL: at least one report; every file in reports/ is r.<pid>.json, mode 0600,
# names the pid it contains, and passes check_report.py with options.pool == POOL and no errors.
reports_ok() {
  local name=$1 mode=$2 pool=$3
  local dir=$WORK/$name/$mode/reports
  local n
  n=$(ls -A "$dir" | wc -l)
  [ "$n" -ge 1 ] || fail "$name/$mode: no report written in $dir"
  local f base pid
  for f in "$dir"/* "$dir"/.[!.]*; do
    [ -e "$f" ] || continue
    base=$(basename "$f")
    case "$base" in
      r.[0-9]*.json) ;;
      *) fail "$name/$mode: unexpected file $base in the report folder (a temporary file left behind?)" ;;
    esac
    [ -f "$f" ] && [ ! -L "$f" ] || fail "$name/$mode: $base is not a regular file"
    local perms
    perms=$(stat -c %a "$f")
    [ "$perms" = 600 ] || fail "$name/$mode: $base has mode $perms, not 0600"
    pid=${base#r.}
    pid=${pid%.json}
    local inside
    inside=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["process"]["pid"])' "$f" 2>&1) ||
      fail "$name/$mode: $base: cannot read process.pid: $inside"
    [ "$inside" = "$pid" ] || fail "$name/$mode: $base holds process.pid $inside (report=r.%p.json)"
  done
  local out
  if ! out=$("$PY" "$CHECKER" --expect-option "pool=$pool" --expect-no-errors "$dir"/r.*.json 2>&1); then
    echo "$out" | grep -v '^ok ' >&2
    fail "$name/$mode: check_report.py rejected a report (above)"
  fi
  note "$name/$mode: $n report(s) pass check_report.py"
}

# single_report NAME MODE EXE_BASENAME: exactly one report, from a process that did not fork, whose
# executable is EXE_BASENAME (a glob).
single_report() {
  local name=$1 mode=$2 exe=$3
  local dir=$WORK/$name/$mode/reports
  "$PY" - "$dir" "$exe" <<'EOF' || fail "$name/$mode: single_report"
import fnmatch, glob, json, os, sys
d, exe = sys.argv[1], sys.argv[2]
files = sorted(glob.glob(os.path.join(d, "r.*.json")))
if len(files) != 1:
    sys.exit("expected exactly one report (one process), found %d: %s" % (len(files), [os.path.basename(f) for f in files]))
p = json.load(open(files[0]))["process"]
if not fnmatch.fnmatch(os.path.basename(p["exe"]), exe):
    sys.exit("process.exe = %r, expected a file named %s" % (p["exe"], exe))
if p["forked_from"] is not None:
    sys.exit("process.forked_from = %r, expected null" % (p["forked_from"],))
if p["reason"] != "exit":
    sys.exit("process.reason = %r, expected 'exit'" % (p["reason"],))
EOF
}

# standard_checks NAME EXE_BASENAME: the three-way comparison for a single-process workload.
standard_checks() {
  local name=$1 exe=$2 mode pool
  for mode in pool0 pool1; do
    pool=${mode#pool}
    same_as_bare "$name" "$mode"
    reports_ok "$name" "$mode" "$pool"
    single_report "$name" "$mode" "$exe"
  done
}

# kept_block_stack NAME MODE BYTES: the functions of the stack of the one leak group in the run's report
# that holds one block of BYTES bytes, innermost first, one per line. Fails unless there is exactly one
# such group, of one block.
kept_block_stack() {
  local name=$1 mode=$2 bytes=$3
  "$PY" - "$WORK/$name/$mode"/reports/r.*.json "$bytes" <<'PY' || fail "$name/$mode: the kept block of $bytes bytes"
import json, sys
r = json.load(open(sys.argv[1])); size = int(sys.argv[2])
kept = [g for g in r["leaks"] if g["bytes"] == size]
assert len(kept) == 1 and kept[0]["blocks"] == 1, "groups of the kept block: %r" % kept
print("\n".join(f["function"] for f in kept[0]["stack"]))
PY
}
