#!/bin/bash
# fork_pipeline: fork() without exec while 4 threads allocate (6 rounds); each child allocates,
# prints, runs `printf 'a\nb\nc\n' | sort -r | tr a-z A-Z` through system() and exits 10+round.
# Bare, pool=0 and pool=1: same output and status, no deadlock (a run that hangs fails after the
# timeout), and one report per process, each complete and balanced:
#   the parent (forked_from null); each fork child (forked_from == ppid == the parent's pid);
#   per round, sort -r and tr a-z A-Z (exec'd: forked_from null) under one shell; the sh -c of
#   system() under a fork child when it has a report (dash leaves through _exit(), which runs no exit
#   handlers, so its report is optional); any other report must be a fork of a pipeline shell (a
#   subshell) with forked_from == its ppid.
# Args: LIB CHECKER FORK_PIPELINE
source "$(dirname "$0")/integration_lib.sh"
integration_init "$1" "$2"
prog=$(abspath "$3")
rounds=6
run_three fork_pipeline /dev/null -- "$prog" "$rounds"
[ "$(grep -c '^C$' "$WORK/fork_pipeline/bare/stdout")" = "$rounds" ] ||
  fail "the bare run did not run the pipeline $rounds times: $(cat "$WORK/fork_pipeline/bare/stdout")"
[ "$(grep -c ' corrupt=0$' "$WORK/fork_pipeline/bare/stdout")" = "$rounds" ] ||
  fail "the bare run's children did not all check their blocks clean: $(cat "$WORK/fork_pipeline/bare/stdout")"
for mode in pool0 pool1; do
  same_as_bare fork_pipeline "$mode"
  reports_ok fork_pipeline "$mode" "${mode#pool}"
  "$PY" - "$WORK/fork_pipeline/$mode/reports" "$rounds" <<'PYEOF' || fail "fork_pipeline/$mode: the reports do not match the process tree (above)"
import glob, json, os, sys
d, rounds = sys.argv[1], int(sys.argv[2])
reps = [json.load(open(f))["process"] for f in sorted(glob.glob(os.path.join(d, "r.*.json")))]
def name(p): return os.path.basename(p["exe"])
def show(p): return "pid=%s ppid=%s forked_from=%s exe=%s argv=%s" % (p["pid"], p["ppid"], p["forked_from"], p["exe"], p["argv"])
errors = []
accounted = set()
parents = [p for p in reps if name(p) == "fork_pipeline" and p["forked_from"] is None]
if len(parents) != 1:
    sys.exit("expected one report of the parent fork_pipeline (forked_from null), found %d" % len(parents))
parent = parents[0]
accounted.add(parent["pid"])
children = [p for p in reps if p["forked_from"] == parent["pid"]]
if len(children) != rounds:
    errors.append("expected %d reports with forked_from == %d (the fork children), found %d"
                  % (rounds, parent["pid"], len(children)))
for c in children:
    accounted.add(c["pid"])
    if c["ppid"] != parent["pid"]:
        errors.append("fork child %s: ppid %s, expected the parent %s" % (c["pid"], c["ppid"], parent["pid"]))
    if name(c) != "fork_pipeline":
        errors.append("fork child %s: exe %s, expected fork_pipeline" % (c["pid"], c["exe"]))
# system()'s sh -c under each child. dash leaves through _exit(), which runs no exit handlers, so
# its report (and its subshells') is optional; when there is one it must sit under a fork child.
shells = [p for p in reps if p["argv"][:2] == ["sh", "-c"] and p["forked_from"] is None]
child_pids = set(c["pid"] for c in children)
for sh in shells:
    accounted.add(sh["pid"])
    if sh["ppid"] not in child_pids:
        errors.append("sh -c %s: ppid %s is not a fork child %s" % (sh["pid"], sh["ppid"], sorted(child_pids)))
if len(shells) > rounds:
    errors.append("%d reports of sh -c, expected at most %d" % (len(shells), rounds))
# sort -r and tr a-z A-Z: exec'd by the pipeline's shell, one pair per round, each with its report.
sorts = [p for p in reps if p["argv"] == ["sort", "-r"] and p["forked_from"] is None]
trs = [p for p in reps if p["argv"] == ["tr", "a-z", "A-Z"] and p["forked_from"] is None]
for label, found in (("sort -r", sorts), ("tr a-z A-Z", trs)):
    if len(found) != rounds:
        errors.append("expected %d reports of %s (one per round), found %d" % (rounds, label, len(found)))
    accounted.update(p["pid"] for p in found)
pipeline_shells = set(p["ppid"] for p in sorts)
if pipeline_shells != set(p["ppid"] for p in trs) or len(pipeline_shells) != len(sorts):
    errors.append("each round's sort and tr must share one parent shell: sort ppids %s, tr ppids %s"
                  % (sorted(p["ppid"] for p in sorts), sorted(p["ppid"] for p in trs)))
for sh in shells:
    if sh["pid"] not in pipeline_shells:
        errors.append("sh -c %s has no sort/tr reports under it" % sh["pid"])
for p in reps:
    if p["forked_from"] in pipeline_shells:  # a subshell of the pipeline (dash runs printf in one)
        accounted.add(p["pid"])
for p in reps:
    if p["forked_from"] is not None and p["forked_from"] != p["ppid"]:
        errors.append("report %s: forked_from %s is not its ppid %s" % (p["pid"], p["forked_from"], p["ppid"]))
    if p["pid"] not in accounted:
        errors.append("a report from a process that is not in the expected tree: " + show(p))
if errors:
    print("reports:", file=sys.stderr)
    for p in reps:
        print("  " + show(p), file=sys.stderr)
    sys.exit("\n".join(errors))
print("--- %d reports: parent, %d fork children, their sh, sort, tr and subshells" % (len(reps), len(children)))
PYEOF
done
echo PASS
