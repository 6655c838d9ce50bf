#!/bin/bash
# One stress workload of //tests/hardening:stress, bare, pool=0 and pool=1, each run under a time
# limit (a hang fails with a message): stdout and stderr byte-identical to the bare run, the same exit
# status, every report complete, balanced and error-free (check_report.py: logical.allocs -
# logical.frees == logical.live_blocks and the pool identities). For `fork`: one report per child,
# each naming its parent in process.forked_from.
# Args: LIB CHECKER STRESS PLUGIN MODE.  Long form (POOLSCOPE_HARDENING_LONG=1): 5-10x the work.

source "$(dirname "$0")/hardening_lib.sh"
integration_init "$1" "$2"
prog=$(abspath "$3")
plugin=$(abspath "$4")
mode=$5

case "$mode" in
  threads) args=("$(pick 2000 20000)") ;;
  storm) args=("$(pick 400000 4000000)") ;;
  fork) args=("$(pick 20 200)") ;;
  dlopen) args=("$plugin" "$(pick 200 2000)") ;;
  signals) args=("$(pick 2000 20000)") ;;
  large) args=() ;;
  small) args=("$(pick 1000000 5000000)") ;;
  *) fail "unknown mode $mode" ;;
esac
RUN_TIMEOUT=$(pick 90 600)
name=stress_$mode
for m in bare pool0 pool1; do
  case $m in
    bare) opts=- ;;
    pool0) opts="pool=0:quiet=1:report=@REPORT@" ;;
    pool1) opts="pool=1:quiet=1:report=@REPORT@" ;;
  esac
  t0=$(now_ms)
  run_with_options "$name" "$m" "$opts" /dev/null -- "$prog" "$mode" "${args[@]}"
  note "$name/$m: $(( $(now_ms) - t0 )) ms"
done
[ "$(cat "$WORK/$name/bare/status")" = 0 ] || fail "the bare run failed: $(cat "$WORK/$name/bare/stderr")"
for m in pool0 pool1; do
  pool=${m#pool}
  same_as_bare "$name" "$m"
  reports_ok "$name" "$m" "$pool"
  if [ "$mode" = fork ]; then
    "$PY" - "$WORK/$name/$m/reports" "${args[0]}" <<'PYEOF' || fail "$name/$m: fork reports"
import glob, json, os, sys
d, rounds = sys.argv[1], int(sys.argv[2])
reps = [json.load(open(f)) for f in sorted(glob.glob(os.path.join(d, "r.*.json")))]
parents = [r for r in reps if r["process"]["forked_from"] is None]
children = [r for r in reps if r["process"]["forked_from"] is not None]
if len(parents) != 1:
    sys.exit("expected one parent report, found %d" % len(parents))
if len(children) != rounds:
    sys.exit("expected %d child reports, found %d" % (rounds, len(children)))
ppid = parents[0]["process"]["pid"]
bad = [r["process"]["pid"] for r in children if r["process"]["forked_from"] != ppid]
if bad:
    sys.exit("children %s do not name the parent %d in forked_from" % (bad, ppid))
print("--- %d child reports name parent %d" % (len(children), ppid))
PYEOF
  else
    single_report "$name" "$m" stress
  fi
done
echo PASS
