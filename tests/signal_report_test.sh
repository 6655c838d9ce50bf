#!/bin/bash
# A process ended by SIGTERM, SIGINT or SIGHUP (default action) writes its report, then dies of that
# same signal: its parent sees death by the signal (waitpid, not only a shell's 128+N), as bare. The
# report passes check_report.py, says process.reason "signal" and process.signal, and lists the
# program's kept 4321-byte block. A program with its own handler, or SIG_IGN (set or inherited),
# behaves exactly as bare; the dispositions a program sets and reads back are the same lines bare
# and preloaded (tests/programs/sigterm.c `view`, which ends with SIGTERM set back to SIG_DFL, so
# poolscope must take it back). python3 still gets KeyboardInterrupt on SIGINT; a SIGTERM'd python3
# sleep and `bash -c` (exec'd sleep, and a waiting bash) behave as bare and leave reports. The
# handler is bounded: a report that cannot be written (its path a FIFO nobody reads) ends in death
# by the signal after the deadline, and at once when the signal comes again; a signal that lands on
# a thread allocating without end always ends the process, with or without a report.
# Args: LIB CHECKER SIGTERM
set -euo pipefail
source "$(dirname "$0")/integration_lib.sh"
integration_init "$1" "$2"
prog=$(abspath "$3")

# signal_run NAME MODE OPTIONS READY SIGNALS -- CMD [ARGS...]
#   Starts CMD (bare when OPTIONS is "-", else preloaded with POOLSCOPE_OPTIONS=OPTIONS, @REPORT@ as
#   in run_with_options) with SIGINT, SIGTERM and SIGHUP at their default action (a background job
#   of this script would have SIGINT ignored), waits until it is ready (READY: "stdout", a line
#   "ready" on its stdout; "child", it has a child process; "exec:NAME", it runs NAME, and when
#   preloaded, catches SIGTERM: poolscope is loaded), then sends
#   SIGNALS (comma-separated, 0.3 s apart) and waits for it, at most 20 s. Writes stdout, stderr,
#   status ("signal N" or "exit N", from waitpid) and elapsed (seconds from the first signal) in
#   $WORK/NAME/MODE. A child it left (bash's sleep) is killed by its pid.
signal_run() {
  local name=$1 mode=$2 options=$3 ready=$4 signals=$5
  shift 5
  [ "$1" = "--" ] || fail "signal_run: missing --"
  shift
  local dir=$WORK/$name/$mode
  rm -rf "$dir"
  mkdir -p "$dir/reports"
  local -a vars=(-u LD_PRELOAD -u POOLSCOPE_OPTIONS)
  if [ "$options" != "-" ]; then
    vars=(LD_PRELOAD="$LIB" POOLSCOPE_OPTIONS="${options//@REPORT@/$dir/reports/r.%p.json}")
  fi
  (cd "$dir" && "$PY" - "$dir" "$ready" "$signals" env --default-signal=INT,TERM,HUP "${vars[@]}" "$@" <<'PY') ||
import os, signal, subprocess, sys, time
d, ready, signals, argv = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
out, err = open(d + "/stdout", "wb"), open(d + "/stderr", "wb")
p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err)
def children(pid):
    try:
        return [int(c) for c in open("/proc/%d/task/%d/children" % (pid, pid)).read().split()]
    except OSError:
        return []
def caught(pid, sig):
    for line in open("/proc/%d/status" % pid):
        if line.startswith("SigCgt:"):
            return (int(line.split()[1], 16) >> (sig - 1)) & 1 == 1
    return False
preloaded = any(a.startswith("LD_PRELOAD=") for a in argv)
deadline = time.monotonic() + 30
left = []
while True:
    if p.poll() is not None:
        sys.exit("the process ended before it was ready, %s" % p.returncode)
    if time.monotonic() > deadline:
        p.kill()
        sys.exit("not ready after 30 s")
    if ready == "stdout" and b"ready\n" in open(d + "/stdout", "rb").read():
        break
    if ready == "child" and children(p.pid):
        left = children(p.pid)
        time.sleep(0.3)  # the shell is in its wait by now
        break
    if ready.startswith("exec:") and open("/proc/%d/comm" % p.pid).read().strip() == ready[5:]:
        if not preloaded or caught(p.pid, signal.SIGTERM):  # poolscope is loaded, its handler in
            break
    time.sleep(0.05)
start = time.monotonic()
for i, name in enumerate(signals.split(",")):
    if i > 0:
        time.sleep(0.3)
    if p.poll() is None:
        p.send_signal(getattr(signal, name))
try:
    p.wait(timeout=20)
except subprocess.TimeoutExpired:
    p.kill()
    p.wait()
    sys.exit("still running 20 s after %s (a hang)" % signals)
elapsed = time.monotonic() - start
for c in left:
    try:
        os.kill(c, signal.SIGKILL)
    except ProcessLookupError:
        pass
rc = p.returncode
open(d + "/status", "w").write("signal %d\n" % -rc if rc < 0 else "exit %d\n" % rc)
open(d + "/elapsed", "w").write("%.3f\n" % elapsed)
PY
    fail "$name/$mode: $*"
  note "$name/$mode: $(cat "$dir/status"), $(cat "$dir/elapsed") s after $signals, $(ls "$dir/reports" | wc -l) report(s)"
}

status_is() {
  local name=$1 mode=$2 want=$3
  [ "$(cat "$WORK/$name/$mode/status")" = "$want" ] ||
    fail "$name/$mode: $(cat "$WORK/$name/$mode/status"), expected $want"
}

# report_of NAME MODE PID_OR_STAR REASON [SIGNAL]: the report of that process (the only one with *)
# says process.reason REASON and process.signal SIGNAL (none unless REASON is signal).
report_of() {
  local name=$1 mode=$2 pid=$3 reason=$4 sig=${5:-}
  "$PY" - "$WORK/$name/$mode/reports" "$pid" "$reason" "$sig" <<'PY' || fail "$name/$mode: the report"
import glob, json, os, sys
d, pid, reason, sig = sys.argv[1:5]
files = sorted(glob.glob(os.path.join(d, "r.%s.json" % pid)))
if len(files) != 1:
    sys.exit("expected one report r.%s.json, found %s" % (pid, [os.path.basename(f) for f in os.listdir(d)]))
p = json.load(open(files[0]))["process"]
if p["reason"] != reason or p.get("signal") != (sig or None):
    sys.exit("process.reason = %r, process.signal = %r; expected %r, %r" % (p["reason"], p.get("signal"), reason, sig or None))
PY
}

# A sleeping program killed by each of the three signals: as bare, and a balanced report with its block.
for sig in TERM INT HUP; do
  name=sleep_$sig
  signal_run $name bare - stdout SIG$sig -- "$prog" sleep 30
  num=$("$PY" -c "import signal; print(int(signal.SIG$sig))")
  status_is $name bare "signal $num"
  for pool in 0 1; do
    signal_run $name pool$pool "pool=$pool:quiet=1:report=@REPORT@" stdout SIG$sig -- "$prog" sleep 30
    same_as_bare $name pool$pool
    reports_ok $name pool$pool $pool
    report_of $name pool$pool '*' signal SIG$sig
    kept_block_stack $name pool$pool 4321 >/dev/null
  done
done

# A handler of the program's own, SIG_IGN set by the program, SIG_IGN inherited across exec: as bare,
# the handler runs, and the report (written at exit) says so.
signal_run handler bare - stdout SIGTERM -- "$prog" handler
status_is handler bare "exit 3"
grep -qx "handler ran" "$WORK/handler/bare/stdout" || fail "handler/bare: the handler did not run"
signal_run ignore bare - stdout SIGTERM -- "$prog" ignore
status_is ignore bare "exit 4"
signal_run inherited bare - stdout SIGTERM -- env --ignore-signal=TERM "$prog" sleep 2
status_is inherited bare "exit 0"
for pool in 0 1; do
  signal_run handler pool$pool "pool=$pool:quiet=1:report=@REPORT@" stdout SIGTERM -- "$prog" handler
  signal_run ignore pool$pool "pool=$pool:quiet=1:report=@REPORT@" stdout SIGTERM -- "$prog" ignore
  signal_run inherited pool$pool "pool=$pool:quiet=1:report=@REPORT@" stdout SIGTERM -- \
    env --ignore-signal=TERM "$prog" sleep 2
  for name in handler ignore inherited; do
    same_as_bare $name pool$pool
    reports_ok $name pool$pool $pool
    report_of $name pool$pool '*' exit
  done
done

# Dispositions set and read back through every interposed function: the same lines; SIGTERM, set
# back to SIG_DFL at the end, is poolscope's again.
signal_run view bare - stdout SIGTERM -- "$prog" view
status_is view bare "signal 15"
grep -q "^at start: Terminated SIG_DFL" "$WORK/view/bare/stdout" || fail "view/bare: SIGTERM was not SIG_DFL"
signal_run view pool1 "quiet=1:report=@REPORT@" stdout SIGTERM -- "$prog" view
same_as_bare view pool1
reports_ok view pool1 1
report_of view pool1 '*' signal SIGTERM

# python3: SIGINT is still KeyboardInterrupt (its handler went in because SIGINT looked SIG_DFL);
# SIGTERM ends a sleep with a report.
pyint='import signal, time; print(signal.getsignal(signal.SIGINT)); print("ready", flush=True); time.sleep(30)'
signal_run py_int bare - stdout SIGINT -- env PYTHONMALLOC=malloc "$PY" -c "$pyint"
grep -q "default_int_handler" "$WORK/py_int/bare/stdout" || fail "py_int/bare: $(cat "$WORK/py_int/bare/stdout")"
grep -qx "KeyboardInterrupt" "$WORK/py_int/bare/stderr" || fail "py_int/bare: no KeyboardInterrupt"
signal_run py_int pool1 "quiet=1:report=@REPORT@" stdout SIGINT -- env PYTHONMALLOC=malloc "$PY" -c "$pyint"
same_as_bare py_int pool1
reports_ok py_int pool1 1
pyterm='import time; print("ready", flush=True); time.sleep(30)'
signal_run py_term bare - stdout SIGTERM -- env PYTHONMALLOC=malloc "$PY" -c "$pyterm"
status_is py_term bare "signal 15"
signal_run py_term pool1 "quiet=1:report=@REPORT@" stdout SIGTERM -- env PYTHONMALLOC=malloc "$PY" -c "$pyterm"
same_as_bare py_term pool1
reports_ok py_term pool1 1
report_of py_term pool1 '*' signal SIGTERM

# bash -c: a single command is exec'd (the sleep gets the signal); with two, bash waits for its child
# and the signal is bash's.
for mode in bare pool1; do
  options=-
  [ $mode = bare ] || options="quiet=1:report=@REPORT@"
  signal_run bash_exec $mode "$options" exec:sleep SIGTERM -- /bin/bash -c 'sleep 30'
  signal_run bash_wait $mode "$options" child SIGTERM -- /bin/bash -c 'sleep 30; echo after'
done
status_is bash_exec bare "signal 15"
status_is bash_wait bare "signal 15"
for name in bash_exec bash_wait; do
  same_as_bare $name pool1
  reports_ok $name pool1 1
done
report_of bash_exec pool1 '*' signal SIGTERM
"$PY" - "$WORK/bash_wait/pool1/reports" <<'PY' || fail "bash_wait/pool1: bash's report"
import glob, json, sys
rs = [json.load(open(f))["process"] for f in glob.glob(sys.argv[1] + "/r.*.json")]
bash = [p for p in rs if p["exe"].endswith("/bash")]
if len(bash) != 1 or (bash[0]["reason"], bash[0].get("signal")) != ("signal", "SIGTERM"):
    sys.exit("bash's reports: %r" % bash)
PY

# Bounded: a report that cannot be written (a FIFO nobody reads) ends in death by the signal after the
# deadline (2 s), with no report; the signal coming again ends the process at once.
for case in deadline again; do
  dir=$WORK/fifo_$case
  mkdir -p "$dir"
  rm -f "$dir/report.fifo"
  mkfifo "$dir/report.fifo"
  signals=SIGTERM
  [ $case = deadline ] || signals=SIGTERM,SIGTERM
  signal_run fifo_$case pool1 "quiet=1:report=$dir/report.fifo" stdout $signals -- "$prog" sleep 30
  status_is fifo_$case pool1 "signal 15"
done
"$PY" - "$(cat "$WORK/fifo_deadline/pool1/elapsed")" "$(cat "$WORK/fifo_again/pool1/elapsed")" <<'PY' ||
import sys
deadline, again = float(sys.argv[1]), float(sys.argv[2])
assert 1.9 <= deadline < 10, "the deadline case ended %.3f s after the signal, expected about 2 s" % deadline
assert again < 1.5, "the second signal (0.3 s after the first) ended the process %.3f s after the first" % again
PY
  fail "fifo: the report's deadline"

# A signal that lands on a thread allocating without end (main blocks the three): the process always
# dies of it, within the deadline; the reports written pass check_report.py.
written=0
for i in 1 2 3 4 5 6; do
  signal_run threads run$i "quiet=1:report=@REPORT@" stdout SIGTERM -- "$prog" threads
  status_is threads run$i "signal 15"
  "$PY" -c "import sys; assert float(sys.argv[1]) < 10, sys.argv[1]" "$(cat "$WORK/threads/run$i/elapsed")" ||
    fail "threads/run$i: the process took $(cat "$WORK/threads/run$i/elapsed") s to die"
  if [ -n "$(ls "$WORK/threads/run$i/reports")" ]; then
    reports_ok threads run$i 1
    report_of threads run$i '*' signal SIGTERM
    written=$((written + 1))
  fi
done
note "threads: $written of 6 runs wrote a report (the others reached the deadline)"

echo "PASS: SIGTERM, SIGINT and SIGHUP leave reports and end the process as bare"
