#!/bin/bash
# The N-iterations property: thread_churn N and thread_churn 2N (same 200 threads) differ, per entry
# point, by exactly N * 200 * (the calls one iteration of one thread makes). The per-iteration counts
# below were read off tests/programs/thread_churn.cc (Allocate, Release, ReceiveAndFree and the loop
# in ThreadMain; the table in its header comment), NOT taken from a run:
#   malloc 2      kMallocSmall, kMallocLarge
#   calloc 1      kCalloc
#   realloc 4     kRealloc: realloc(NULL,24), realloc(p,100), realloc(p,16); ReceiveAndFree's realloc
#   reallocarray 2  reallocarray(NULL,3,8), reallocarray(p,10,8)
#   posix_memalign 1, aligned_alloc 1, memalign 1, valloc 1, pvalloc 1
#   free 11       the 10 C kinds, each released once with free(), plus free(nullptr) in ThreadMain
#   new 7 / delete 7       plain, nothrow, sized, aligned, aligned nothrow, sized aligned, new-expression
#   new[] 7 / delete[] 7   the same seven forms
#   logical.allocs 24 (blocks created, realloc(NULL,...) and reallocarray(NULL,...) included),
#   logical.frees 24, logical.reallocs 4 (resizes of an existing block: 2 + 1 + the receiver's).
# Every other by_api key (poolscope_arena_*, anything additive) must not change with N.
# Checked with pool=0 on both ledgers (real == logical there) and with pool=1 on the logical ledger
# (the program's calls do not depend on pooling).
# Args: LIB CHECKER THREAD_CHURN
source "$(dirname "$0")/integration_lib.sh"
integration_init "$1" "$2"
prog=$(abspath "$3")
N=2
for pool in 0 1; do
  run_with_options churn n1_pool$pool "pool=$pool:quiet=1:report=@REPORT@" /dev/null -- "$prog" "$N"
  run_with_options churn n2_pool$pool "pool=$pool:quiet=1:report=@REPORT@" /dev/null -- "$prog" "$((2 * N))"
  for run in n1_pool$pool n2_pool$pool; do
    [ "$(cat "$WORK/churn/$run/status")" = 0 ] || fail "churn/$run: exit status $(cat "$WORK/churn/$run/status"): $(cat "$WORK/churn/$run/stdout" "$WORK/churn/$run/stderr")"
    reports_ok churn "$run" "$pool"
  done
done
"$PY" - "$WORK/churn" "$N" <<'PYEOF' || fail "the by_api difference between thread_churn $N and $((2 * N)) is not what the program's code dictates (above)"
import glob, json, os, sys
root, n = sys.argv[1], int(sys.argv[2])
THREADS = 200
PER_ITERATION = {  # calls per iteration per thread, from reading thread_churn.cc (see the comment)
    "malloc": 2, "calloc": 1, "realloc": 4, "reallocarray": 2, "posix_memalign": 1,
    "aligned_alloc": 1, "memalign": 1, "valloc": 1, "pvalloc": 1, "free": 11,
    "new": 7, "new[]": 7, "delete": 7, "delete[]": 7,
}
LEDGER_PER_ITERATION = {"allocs": 24, "frees": 24, "reallocs": 4}
def load(run):
    files = glob.glob(os.path.join(root, run, "reports", "r.*.json"))
    if len(files) != 1:
        sys.exit("%s: expected one report, found %d" % (run, len(files)))
    return json.load(open(files[0]))
errors = []
for pool in (0, 1):
    a, b = load("n1_pool%d" % pool), load("n2_pool%d" % pool)
    sides = ["logical", "real"] if pool == 0 else ["logical"]
    for side in sides:
        keys = sorted(set(a[side]["by_api"]) | set(b[side]["by_api"]))
        for k in keys:
            got = b[side]["by_api"].get(k, 0) - a[side]["by_api"].get(k, 0)
            want = PER_ITERATION.get(k, 0) * THREADS * n
            if got != want:
                errors.append("pool=%d %s.by_api[%r]: N=%d -> %d differs by %d, expected %d (= %d per iteration x %d threads x %d)"
                              % (pool, side, k, n, 2 * n, got, want, PER_ITERATION.get(k, 0), THREADS, n))
        for k in PER_ITERATION:
            if k not in keys:
                errors.append("pool=%d %s.by_api has no key %r" % (pool, side, k))
    for k, per in LEDGER_PER_ITERATION.items():
        got = b["logical"][k] - a["logical"][k]
        want = per * THREADS * n
        if got != want:
            errors.append("pool=%d logical.%s: N=%d -> %d differs by %d, expected %d (= %d per iteration x %d threads x %d)"
                          % (pool, k, n, 2 * n, got, want, per, THREADS, n))
if errors:
    sys.exit("\n".join(errors))
print("--- by_api differences match the program for pool=0 (both ledgers) and pool=1 (logical)")
PYEOF
echo PASS
