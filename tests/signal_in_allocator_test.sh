#!/bin/bash
# SIGTERM wherever it lands. A report signal that stops a thread inside the allocator below poolscope
# must not re-enter that allocator (glibc's malloc, re-entered halfway through a call, corrupts its
# heap and aborts): below_probe raises SIGTERM from inside its malloc and fails the process if it is
# entered again meanwhile; every configuration must die of SIGTERM (143) with a report that
# check_report.py accepts, nothing on stderr but the shell's. Then SIGTERM at random moments into
# alloc_storm (one thread and four, malloc and free without end) with the defaults, pool=0 and
# track=0: every run dies of SIGTERM with a checked report, and glibc says nothing. Last, SIGTERM to a
# process holding 4 GiB: it dies of it within the report's deadline (2 s, and some for the machine's
# load), with a checked report whose scan either finished or says why it was cut off.
# Args: LIB CHECKER PROBE_LIB ALLOC_STORM BIG_HEAP
set -euo pipefail
source "$(dirname "$0")/integration_lib.sh"
integration_init "$1" "$2"
probe=$(abspath "$3")
storm=$(abspath "$4")
big=$(abspath "$5")
failures=0

# one_run DIR OPTIONS (DIR without ':', which would end the report option) PRELOAD DELAY -- CMD...: runs CMD, sends SIGTERM DELAY seconds after it printed
# "started" (never, when DELAY is "-": the program signals itself); checks status, report and stderr.
one_run() {
  local dir=$1 options=$2 preload=$3 delay=$4
  shift 5
  rm -rf "$dir"
  mkdir -p "$dir"
  POOLSCOPE_OPTIONS="$options:quiet=1:report=$dir/r.%p.json" LD_PRELOAD="$preload" "$@" > "$dir/out" 2> "$dir/err" &
  local pid=$! status
  if [ "$delay" != - ]; then
    for _ in $(seq 1 3000); do grep -q started "$dir/out" && break; sleep 0.01; done
    sleep "$delay"
    kill -TERM "$pid" 2> /dev/null || true
  fi
  local t0
  t0=$(date +%s%N)
  # A run that outlives the report's deadline by far has hung.
  for _ in $(seq 1 300); do kill -0 "$pid" 2> /dev/null || break; sleep 0.1; done
  if kill -0 "$pid" 2> /dev/null; then
    kill -KILL "$pid"
    echo "FAIL: $dir: still running 30 s after SIGTERM"
    failures=$((failures + 1))
    return
  fi
  set +e
  wait "$pid"
  status=$?
  set -e
  echo $((($(date +%s%N) - t0) / 1000000)) > "$dir/ms"
  local report
  report=$(ls "$dir"/r.*.json 2> /dev/null | head -1 || true)
  if [ "$status" -ne 143 ] || [ -z "$report" ] || [ -s "$dir/err" ]; then
    echo "FAIL: $dir ($options): status $status (want 143), report ${report:-none}, stderr: $(head -c 300 "$dir/err")"
    failures=$((failures + 1))
  elif ! "$PY" "$CHECKER" "$report" > "$dir/check" 2>&1; then
    echo "FAIL: $dir ($options): the report fails its check: $(head -c 300 "$dir/check")"
    failures=$((failures + 1))
  elif ! grep -q '"reason": *"signal"' "$report"; then
    echo "FAIL: $dir ($options): the report's reason is not \"signal\""
    failures=$((failures + 1))
  fi
}

for options in pool=1 pool=0 track=0 pool=0:track=0; do
  one_run "$WORK/inside/${options//[=:]/_}" "$options" "$LIB $probe" - -- "$storm" 1 77777
done
[ "$failures" -eq 0 ] && note "SIGTERM inside the allocator below: reports written after the call, in every configuration"

runs=${SIGNAL_STORM_RUNS:-20}
for threads in 1 4; do
  for options in pool=1 pool=0 track=0; do
    for i in $(seq 1 "$runs"); do
      delay=$(awk -v s="$RANDOM" 'BEGIN { srand(s); printf "%.3f", 0.005 + rand() * 0.2 }')
      one_run "$WORK/storm/$threads/${options//=/_}/$i" "$options" "$LIB" "$delay" -- "$storm" "$threads"
    done
  done
done

dir=$WORK/big
one_run "$dir" pool=1 "$LIB" 0 -- "$big" 4
if [ "$failures" -eq 0 ]; then
  "$PY" - "$(ls "$dir"/r.*.json)" "$dir/ms" <<'PY' || failures=$((failures + 1))
import json, sys
r = json.load(open(sys.argv[1]))["reachability"]
if r["scanned"]:
    print(f"--- 4 GiB heap: scanned in {r['scan_ms']} ms")
elif "deadline" in r.get("not_scanned_why", ""):
    print(f"--- 4 GiB heap: the scan was cut off: {r['not_scanned_why']}")
else:
    print(f"FAIL: 4 GiB heap: not scanned, and not for the deadline: {r}")
    sys.exit(1)
PY
  ms=$(cat "$dir/ms")
  [ "$ms" -le 4000 ] || { echo "FAIL: 4 GiB heap: ${ms} ms from SIGTERM to death"; failures=$((failures + 1)); }
fi
[ "$failures" -eq 0 ] || fail "$failures runs did not end as they should"
echo "PASS: SIGTERM at $((2 * 3 * runs)) random moments and inside the allocator below: every run died of it with a checked report"
