#!/bin/bash
# The report's timeline (docs/report-schema.md `timeline`), on tests/programs/phases.c, which holds
# N blocks between two phases of regular-path churn and allocates nothing else:
#   - with pool=0 and pool=1, track=0 and track=1: the report holds its identities (the last point
#     is the report's own counts; points in time order, at most 201);
#   - the samples show the three phases: the live-block peak is the blocks live at exit + N + 1 (the
#     program's array of N pointers, freed last), + 1 more when the sample was taken at a malloc of
#     the churn rather than at its free; points before and after the peak are at the blocks live at
#     exit + 1 or + 2 likewise;
#   - the resident set at the peak is above the first point's by at least N's bytes over two;
#   - with track=1, the live bytes: the program's blocks are N/2 of 24 bytes and N/2 of 200, its array
#     8 N, the churn's block 1,000; so at every point that holds the N blocks (by its block count)
#     logical live bytes are the bytes live at exit + 8 N + 112 N (+ 1,000 when the sample caught a
#     churn block), and at every point before or after them the bytes live at exit + 8 N (+ 1,000);
#     some of each with logical bytes (a sample may skip reading the pools: docs/report-schema.md).
#     Real live bytes count the pools whole instead of their blocks: with pool=1 (pools of 64 bytes:
#     the 24-byte blocks are pooled, the others too large) the real bytes less the point's pools at
#     64 bytes each are the unpooled bytes live at exit + 8 N + 100 N while the N blocks are held
#     (+ 1,000); with pool=0 they are the logical bytes. With track=0 every point's bytes are null
#     (frees are not sized);
#   - a longer run's points span it, from its start to its end (how they thin out past 200 samples:
#     //interpose:timeline_series_test);
#   - the program's stdout and status are the bare run's;
#   - a process in a seccomp sandbox that traps open into a SIGSYS handler (tests/programs/
#     seccomp_trap.c) keeps running while samples are taken: a sample's open of /proc/self/statm is
#     refused, never made with SIGSYS blocked (which the kernel answers by killing the process).
# Args: LIB CHECKER PHASES SECCOMP_TRAP
source "$(dirname "$0")/integration_lib.sh"
integration_init "$1" "$2"
prog=$(abspath "$3")
sandboxed=$(abspath "$4")
N=60000

run_with_options phases bare - /dev/null -- "$prog" "$N" 60 150 60
for track in 0 1; do
  for pool in 0 1; do
    mode="pool$pool.track$track"
    run_with_options phases "$mode" "pool=$pool:track=$track:quiet=1:report=@REPORT@" /dev/null -- \
      "$prog" "$N" 60 150 60
    same_as_bare phases "$mode"
    reports_ok phases "$mode" "$pool"
    "$PY" - "$N" "$mode" "$WORK/phases/$mode/reports"/r.*.json <<'PY' || fail "$mode: timeline"
import json, sys
n, mode, path = int(sys.argv[1]), sys.argv[2], sys.argv[3]
d = json.load(open(path))
pts = d["timeline"]["points"]
live = [p["logical_live_blocks"] for p in pts]
base = d["logical"]["live_blocks"]
peak = max(live)
at = live.index(peak)
problems = []
if peak - base - n not in (1, 2):
    problems.append("peak %d is not live at exit %d + N %d + 1 or 2" % (peak, base, n))
if not any(v - base in (1, 2) for v in live[:at]):
    problems.append("no point before the peak at live at exit (%d) + 1 or 2: %s" % (base, live[:at]))
if not any(v - base in (1, 2) for v in live[at:]):
    problems.append("no point after the peak at live at exit (%d) + 1 or 2: %s" % (base, live[at:]))
track, pool = int(mode[-1]), int(mode[4])
if track == 0:
    for i, p in enumerate(pts):
        if p["logical_live_bytes"] is not None or p["real_live_bytes"] is not None:
            problems.append("point %d has live bytes with track=0: %s" % (i, p))
else:
    # What the allocator below holds for a pool: the pool, its metadata and the slack that lets it
    # start on a 64-byte boundary.
    pool_bytes = d["pool"]["pool_real_bytes"]
    assert pool_bytes > 64, d["pool"]
    base_bytes = d["logical"]["live_bytes"]
    # The real bytes live at exit that are not pools.
    base_real = d["real"]["live_bytes"] - pts[-1]["pools"] * pool_bytes
    def real_unpooled(p):
        return p["real_live_bytes"] - p["pools"] * pool_bytes
    held_real = (108 if pool else 120) * n
    # Every point held N blocks (the peak's count, the churn's block aside) or none of them.
    held = [p for p in pts if p["logical_live_blocks"] - base - n in (1, 2)]
    free = [p for p in pts if p["logical_live_blocks"] - base in (1, 2)]
    for name, span, logical, real in (("holding N", held, 120 * n, held_real), ("not holding N", free, 8 * n, 8 * n)):
        known = [p for p in span if p["logical_live_bytes"] is not None]
        if not known:
            problems.append("no point %s has logical live bytes: %s" % (name, span[:3]))
        bad = [p for p in known if p["logical_live_bytes"] - base_bytes - logical not in (0, 1000)]
        bad += [p for p in span if real_unpooled(p) - base_real - real not in (0, 1000)]
        if bad:
            problems.append("points %s not at the bytes live at exit + %d logical (%d), + %d real "
                            "(%d, less the pools) (+ 1000): %s" % (name, logical, base_bytes, real, base_real, bad[:3]))
        print("%s: %d points %s, %d with logical bytes" % (mode, len(span), name, len(known)))
rss0, rss_peak = pts[0]["rss_kib"], pts[at]["rss_kib"]
if rss0 is None or rss_peak is None or rss_peak - rss0 < n * 112 // 2 // 1024:
    problems.append("resident set at the peak %s KiB, first point %s KiB" % (rss_peak, rss0))
for p in problems:
    print("%s: %s" % (mode, p))
print("%s: %d points, peak %d at %d ms, interval %d ms" % (mode, len(pts), peak, pts[at]["t_ms"],
                                                           d["timeline"]["interval_ms"]))
sys.exit(1 if problems else 0)
PY
  done
done

note "a longer run: the samples span it"
run_with_options long pool1 "pool=1:quiet=1:report=@REPORT@" /dev/null -- "$prog" 1000 100 800 100
reports_ok long pool1 1
"$PY" - "$WORK/long/pool1/reports"/r.*.json <<'PY' || fail "long run: timeline"
import json, sys
d = json.load(open(sys.argv[1]))
t = d["timeline"]
pts = t["points"]
end_ms = (d["process"]["end_ns"] - d["process"]["start_ns"]) // 1000000
problems = []
if len(pts) > 201 or len(pts) < 20:
    problems.append("%d points" % len(pts))
if pts[0]["t_ms"] > 100:
    problems.append("first point at %d ms" % pts[0]["t_ms"])
if pts[-2]["t_ms"] < 900:
    problems.append("last sample at %d ms, the run took %d" % (pts[-2]["t_ms"], end_ms))
print("long run: %d points, interval %d ms, %d..%d ms"
      % (len(pts), t["interval_ms"], pts[0]["t_ms"], pts[-1]["t_ms"]))
for p in problems:
    print("long run: " + p)
sys.exit(1 if problems else 0)
PY
note "a seccomp sandbox that traps open"
run_with_options sandbox bare - /dev/null -- "$sandboxed" 300
for pool in 0 1; do
  run_with_options sandbox "pool$pool" "pool=$pool:quiet=1:report=@REPORT@" /dev/null -- "$sandboxed" 300
  got=$(cat "$WORK/sandbox/pool$pool/status")
  want=$(cat "$WORK/sandbox/bare/status")
  [ "$got" = "$want" ] || fail "sandbox/pool$pool: exit status $got, bare $want"
  cmp -s "$WORK/sandbox/bare/stdout" "$WORK/sandbox/pool$pool/stdout" ||
    fail "sandbox/pool$pool: stdout differs from bare"
done
echo "PASS"
