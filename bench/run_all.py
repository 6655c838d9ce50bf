"""bench/run_all.py: every benchmark of docs/BENCHMARKS.md, one markdown table. Run through bench/run_all.sh
(which builds the binaries and passes their paths); standard library only, /usr/bin/python3.

Steps (docs/BENCHMARKS.md explains each):
  gbench    bench/article_bench under glibc alone, jemalloc, tcmalloc, mimalloc, poolscope pool=0 and
            pool=1 (track=0 valgrind=0), interleaved round by round; single-thread runs pinned to CPU 0,
            multi-thread runs (2 and nproc threads, and a 1-thread point for scaling) on every CPU.
  process   python3 (PYTHONMALLOC=malloc), sqlite3, perl: bare, poolscope counting only, pooling, full
            defaults, heaptrack (traced run timed, then interpreted) and valgrind memcheck, interleaved,
            pinned to CPU 0; wall time, CPU time and peak RSS (getrusage of the child, via wait4).
  callgrind bench/callgrind_pair.sh with the peers (instructions per malloc+free pair) and, for the
            pooled and pass-through runs, instructions per pair per function (callgrind_annotate of
            the N and 2N runs, differenced).

Any failed step (a run that exits non-zero or crashes, stdout that differs from the bare run, a
missing figure) is listed under "Failures" in the table and makes the exit status 1; the table is
written in every case.
"""
import argparse
import datetime
import glob
import hashlib
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

PEER_DIR = "/usr/lib/x86_64-linux-gnu"
PEERS = {
    "jemalloc": PEER_DIR + "/libjemalloc.so.2",
    "tcmalloc": PEER_DIR + "/libtcmalloc_minimal.so.4",
    "mimalloc": PEER_DIR + "/libmimalloc.so.2",
}
HEAPTRACK_PRELOAD = "/usr/lib/heaptrack/libheaptrack_preload.so"
HEAPTRACK_INTERPRET = "/usr/lib/heaptrack/libexec/heaptrack_interpret"
QUIET = "quiet=1:report=none"
POOL0 = "pool=0:track=0:valgrind=0"
POOL1 = "pool=1:track=0:valgrind=0"
DEFAULTS = "pool=1:track=1:stack_depth=16"
SIZES = [5, 20, 100, 500, 2000, 8000]

failures = []


def fail(msg):
    failures.append(msg)
    print("run_all: FAIL: " + msg, file=sys.stderr, flush=True)


def log(msg):
    print("run_all: " + msg, file=sys.stderr, flush=True)


def base_env():
    env = dict(os.environ)
    for k in ("LD_PRELOAD", "POOLSCOPE_OPTIONS", "DUMP_HEAPTRACK_OUTPUT", "PYTHONMALLOC"):
        env.pop(k, None)
    return env


def pin(cpus):
    """A preexec_fn that pins the child to cpus. Not a taskset wrapper: heaptrack's preload library
    clears LD_PRELOAD and DUMP_HEAPTRACK_OUTPUT in the first process it loads into, so it would trace
    taskset and not the program (PEERS.md)."""
    return lambda: os.sched_setaffinity(0, cpus)


# ---------------------------------------------------------------------------------------------------
# 1. Google Benchmark: the allocator comparison, thread scaling
# ---------------------------------------------------------------------------------------------------
def gbench_configs(lib):
    return [
        ("glibc", "glibc alone", None, None),
        ("jemalloc", "jemalloc", PEERS["jemalloc"], None),
        ("tcmalloc", "tcmalloc", PEERS["tcmalloc"], None),
        ("mimalloc", "mimalloc", PEERS["mimalloc"], None),
        ("pool0", "poolscope pool=0", lib, POOL0),
        ("pool1", "poolscope pool=1", lib, POOL1),
    ]


def run_gbench_once(args, work, key, preload, options, mode, rep, sizes):
    size_re = "|".join(str(s) for s in sizes)
    env = base_env()
    if preload:
        env["LD_PRELOAD"] = preload
    if options:
        env["POOLSCOPE_OPTIONS"] = options + ":" + QUIET
    if mode == "st":
        cpus, flt = {0}, "^(malloc_free/(%s)|arena|call_floor/[24])/threads:1$" % size_re
    else:
        cpus, flt = set(range(args.ncpu)), "^(malloc_free/(%s)|arena)/threads:[0-9]+$" % size_re
    out = os.path.join(work, "gbench.%s.%s.%d.json" % (key, mode, rep))
    cmd = [args.bench, "--benchmark_min_time=%g" % args.min_time,
           "--benchmark_filter=" + flt, "--benchmark_out=" + out, "--benchmark_out_format=json"]
    p = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                       preexec_fn=pin(cpus))
    if p.returncode != 0:
        fail("article_bench under %s (%s) exited %d: %s" % (key, mode, p.returncode, p.stderr.strip()[-300:]))
        return []
    try:
        data = json.load(open(out))
    except (OSError, ValueError) as e:
        fail("article_bench under %s (%s): unreadable output: %s" % (key, mode, e))
        return []
    rows = []
    for b in data.get("benchmarks", []):
        if b.get("run_type", "iteration") != "iteration":
            continue
        unit = {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9}[b["time_unit"]]
        rows.append((b["name"], b["cpu_time"] * unit, b["real_time"] * unit, b.get("threads", 1)))
    if not rows:
        fail("article_bench under %s (%s): no benchmark ran" % (key, mode))
    return rows


def step_gbench(args, work, results):
    configs = gbench_configs(args.lib)
    cpu = {}   # (key, mode, name) -> [cpu ns per op per thread]
    real = {}  # (key, mode, name) -> [real ns]
    for rep in range(1, args.reps + 1):
        log("gbench round %d/%d" % (rep, args.reps))
        for key, _, preload, options in configs:
            for mode in ("st", "mt"):
                for name, c, r, _ in run_gbench_once(args, work, key, preload, options, mode, rep, args.sizes):
                    cpu.setdefault((key, mode, name), []).append(c)
                    real.setdefault((key, mode, name), []).append(r)
    results["gbench"] = {"cpu": {"|".join(k): v for k, v in cpu.items()},
                         "real": {"|".join(k): v for k, v in real.items()}}
    return cpu, real


# ---------------------------------------------------------------------------------------------------
# 2. Whole processes
# ---------------------------------------------------------------------------------------------------
def workloads(args, work):
    sql = os.path.join(work, "sqlite_bench.sql")
    rows = max(1000, int(200000 * args.scale))
    with open(sql, "w") as f:
        f.write("""CREATE TABLE t(id INTEGER PRIMARY KEY, grp INTEGER, name TEXT, val REAL);
BEGIN;
WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < %d)
INSERT INTO t(grp, name, val) SELECT x %% 97, 'name-' || x, x * 1.5 FROM c;
COMMIT;
SELECT grp, count(*), sum(val), min(name), max(name) FROM t GROUP BY grp ORDER BY grp LIMIT 5;
CREATE INDEX t_name ON t(name);
SELECT count(*) FROM t WHERE name LIKE 'name-1%%';
SELECT count(*), sum(length(name)) FROM t;
""" % rows)
    py = [args.python, os.path.join(args.bench_dir, "py_bench.py"), "%g" % (0.25 * args.scale)]
    return [
        ("python3", "python3 bench/py_bench.py %g, PYTHONMALLOC=malloc" % (0.25 * args.scale),
         py, {"PYTHONMALLOC": "malloc"}, None),
        ("sqlite3", "sqlite3 :memory: < %d rows inserted, grouped, indexed" % rows,
         ["/usr/bin/sqlite3", "-batch", ":memory:"], {}, sql),
        ("perl", "perl bench/perl_bench.pl %g" % (0.4 * args.scale),
         ["/usr/bin/perl", os.path.join(args.bench_dir, "perl_bench.pl"), "%g" % (0.4 * args.scale)], {}, None),
    ]


def process_configs(args, work):
    return [
        ("bare", "no preload"),
        ("pool0", "poolscope counting only (pool=0 track=0)"),
        ("pool1", "poolscope pooling (pool=1 track=0)"),
        ("defaults", "poolscope full defaults (pool=1 track=1 stack_depth=16)"),
        ("heaptrack", "heaptrack 1.4 (traced run only)"),
        ("memcheck", "valgrind memcheck --leak-check=full"),
    ]


def timed_run(cmd, env, stdin_path, stdout_path):
    """Runs cmd pinned to CPU 0; returns (status, wall s, cpu s, maxrss KiB)."""
    stdin = open(stdin_path) if stdin_path else subprocess.DEVNULL
    with open(stdout_path, "w") as out, open(stdout_path + ".err", "w") as err:
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, env=env, stdin=stdin, stdout=out, stderr=err, preexec_fn=pin({0}))
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    if stdin_path:
        stdin.close()
    return p.returncode, wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss


def run_process(args, work, wl, config, rep, notes):
    name, _, cmd, extra_env, stdin_path = wl
    env = base_env()
    env.update(extra_env)
    full = list(cmd)
    raw = None
    if config == "pool0":
        env["LD_PRELOAD"], env["POOLSCOPE_OPTIONS"] = args.lib, "pool=0:track=0:" + QUIET
    elif config == "pool1":
        env["LD_PRELOAD"], env["POOLSCOPE_OPTIONS"] = args.lib, "pool=1:track=0:" + QUIET
    elif config == "defaults":
        report = os.path.join(work, "report.%s.%d.json" % (name, rep))
        env["LD_PRELOAD"] = args.lib
        env["POOLSCOPE_OPTIONS"] = DEFAULTS + ":quiet=1:report=" + report
    elif config == "heaptrack":
        raw = os.path.join(work, "heaptrack.%s.%d.raw" % (name, rep))
        env["LD_PRELOAD"], env["DUMP_HEAPTRACK_OUTPUT"] = HEAPTRACK_PRELOAD, raw
    elif config == "memcheck":
        full = ["valgrind", "--tool=memcheck", "--leak-check=full",
                "--log-file=" + os.path.join(work, "memcheck.%s.%d.log" % (name, rep))] + full
    stdout_path = os.path.join(work, "out.%s.%s.%d" % (name, config, rep))
    status, wall, cpu, rss = timed_run(full, env, stdin_path, stdout_path)
    if status != 0:
        err = open(stdout_path + ".err").read().strip()[-300:]
        fail("%s under %s exited %d: %s" % (name, config, status, err))
        return None
    bare_out = os.path.join(work, "out.%s.bare.1" % name)
    if config != "bare" and os.path.exists(bare_out) and open(bare_out).read() != open(stdout_path).read():
        fail("%s under %s: stdout differs from the bare run (%s)" % (name, config, stdout_path))
    if config == "defaults" and rep == 1:
        try:
            r = json.load(open(report))
            notes.setdefault("defaults", {})[name] = {
                "sites": len(r.get("sites") or []), "leak_groups": len(r.get("leaks") or []),
                "track": (r.get("options") or {}).get("track"), "pool_hits": (r.get("pool") or {}).get("hits"),
                "logical_allocs": (r.get("logical") or {}).get("allocs")}
        except (OSError, ValueError) as e:
            fail("%s under full defaults: no readable report %s: %s" % (name, report, e))
    if raw:
        if rep == 1:  # interpret once per workload, untimed: proves the trace is complete
            trace = raw + ".gz"
            with open(raw, "rb") as src, open(trace, "wb") as dst:
                interp = subprocess.Popen([HEAPTRACK_INTERPRET], stdin=src, stdout=subprocess.PIPE)
                gz = subprocess.run(["gzip"], stdin=interp.stdout, stdout=dst)
                interp.stdout.close()
                ist = interp.wait()
            pr = subprocess.run(["heaptrack_print", trace], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            m = re.search(r"^calls to allocation functions: (\d+)", pr.stdout, re.M)
            if ist != 0 or gz.returncode != 0 or pr.returncode != 0 or not m:
                fail("heaptrack on %s: interpreting the trace failed (%s)" % (name, pr.stderr.strip()[-200:]))
            else:
                notes.setdefault("heaptrack_calls", {})[name] = int(m.group(1))
        try:
            os.unlink(raw)
        except OSError:
            pass
    return wall, cpu, rss


def step_process(args, work, results, notes):
    wls = workloads(args, work)
    cfgs = [c for c, _ in process_configs(args, work)]
    data = {}  # (workload, config) -> [(wall, cpu, rss)]
    for rep in range(1, args.reps + 1):
        log("whole-process round %d/%d" % (rep, args.reps))
        for wl in wls:
            for config in cfgs:
                if config == "memcheck" and rep > args.memcheck_reps:
                    continue
                r = run_process(args, work, wl, config, rep, notes)
                if r:
                    data.setdefault((wl[0], config), []).append(r)
    results["process"] = {"|".join(k): v for k, v in data.items()}
    return wls, data


# ---------------------------------------------------------------------------------------------------
# 3. callgrind
# ---------------------------------------------------------------------------------------------------
FN_LINE = re.compile(r"^\s*([\d,]+) \(\s*[\d.]+%\)\s+(.*)$")


def annotate(path):
    p = subprocess.run(["callgrind_annotate", "--threshold=100", path], stdout=subprocess.PIPE,
                       stderr=subprocess.DEVNULL, text=True)
    fns = {}
    for line in p.stdout.splitlines():
        m = FN_LINE.match(line)
        if not m or "PROGRAM TOTALS" in line:
            continue
        label = m.group(2)
        fn = label.split(":", 1)[1] if ":" in label.split(" [")[0] else label
        obj = re.search(r"\[([^\]]*)\]\s*$", fn)
        fn = re.sub(r"\s*\[[^\]]*\]\s*$", "", fn)
        if obj:
            fn += " (" + os.path.basename(obj.group(1)) + ")"
        fns[fn] = fns.get(fn, 0) + int(m.group(1).replace(",", ""))
    return fns


def step_callgrind(args, work, results):
    """Keys: 5, 20 (malloc_loop sizes) and "arena" (arena_loop: one open + 2 allocations + close)."""
    per_pair = {}   # (key, label) -> instructions
    profiles = {}   # (key, label) -> [(fn, per pair)]
    jobs = [(str(s), args.loop, s, "malloc(%d)+free pairs" % s) for s in args.callgrind_sizes]
    jobs.append(("arena", args.arena_loop, 0, "arena rounds (open, int + 20 B, close)"))
    for key, loop, size, what in jobs:
        prof = os.path.join(work, "callgrind.%s" % key)
        env = base_env()
        env.update({"SKIP_BUILD": "1", "LIB": args.lib, "LOOP": loop, "N": str(args.callgrind_n),
                    "SIZE": str(size), "PEERS": "1", "PROFILE_DIR": prof, "WHAT": what})
        log("callgrind, " + what)
        p = subprocess.run([os.path.join(args.bench_dir, "callgrind_pair.sh")], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if p.returncode != 0:
            fail("callgrind_pair.sh (%s) exited %d: %s" % (what, p.returncode, p.stderr.strip()[-300:]))
        for line in p.stdout.splitlines():
            m = re.match(r"^(\S+)\s.*per pair: ([\d.-]+)$", line)
            if m:
                per_pair[(key, m.group(1))] = float(m.group(2))
        for label in ("bare", "jemalloc", "tcmalloc", "mimalloc", "passthrough", "pooled"):
            if (key, label) not in per_pair:
                fail("callgrind: no figure for %s (%s)" % (label, what))
        for label in ("passthrough", "pooled"):
            a, b = os.path.join(prof, label + ".N.out"), os.path.join(prof, label + ".2N.out")
            if os.path.exists(a) and os.path.exists(b):
                fa, fb = annotate(a), annotate(b)
                rows = [(fn, (fb.get(fn, 0) - fa.get(fn, 0)) / args.callgrind_n) for fn in set(fa) | set(fb)]
                rows = sorted([r for r in rows if abs(r[1]) >= 0.5], key=lambda r: -r[1])
                profiles[(key, label)] = rows
    results["callgrind"] = {"%s|%s" % k: v for k, v in per_pair.items()}
    results["callgrind_profiles"] = {"%s|%s" % k: v for k, v in profiles.items()}
    return per_pair, profiles


# ---------------------------------------------------------------------------------------------------
# The table
# ---------------------------------------------------------------------------------------------------
def med(xs):
    return statistics.median(xs) if xs else None


def fmt_ns(x):
    return "—" if x is None else ("%.1f" % x if x < 100 else "%.0f" % x)


def fmt_ratio(x):
    return "—" if x is None else "%.2fx" % x


def machine():
    model, cores = "?", os.cpu_count()
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return model, cores


def git_rev(root):
    try:
        rev = subprocess.run(["git", "-C", root, "rev-parse", "--short", "HEAD"], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", root, "status", "--porcelain", "--untracked-files=no"],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True).stdout.strip()
        return rev + (" + uncommitted changes" if dirty else "") if rev else "?"
    except OSError:
        return "?"


def render(args, cpu, real, wls, proc, per_pair, profiles, notes):
    L = []
    model, cores = machine()
    L.append("# poolscope benchmarks")
    L.append("")
    L.append("- date: %s" % datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z"))
    L.append("- machine: %s, %s cores (nproc), kernel %s, glibc %s" % (model, cores, platform.release(),
                                                                       platform.libc_ver()[1] or "?"))
    L.append("- load average at the end: %s" % " ".join(open("/proc/loadavg").read().split()[:3]))
    L.append("- poolscope: checkout %s; libpoolscope.so built %s, sha256 %s… (copied before the first run)"
             % (git_rev(args.root), args.lib_mtime, args.lib_sha))
    L.append("- command: `%s`" % args.command)
    L.append("- mode: %s; %d interleaved rounds (memcheck %d), Google Benchmark min_time %gs, workload scale %g"
             % ("quick" if args.quick else "full", args.reps, min(args.reps, args.memcheck_reps), args.min_time,
                args.scale))
    L.append("")
    configs = gbench_configs(args.lib)
    targets = []

    def m(key, mode, name, table=None):
        return med((table or cpu).get((key, mode, name), []))

    def thr_names():
        ts = sorted({int(n.rsplit(":", 1)[1]) for (_, mode, n) in cpu if mode == "mt"})
        return ts

    if cpu:
        L.append("## 1. malloc+free and the explicit arena: ns per operation (ratio to glibc alone)")
        L.append("")
        L.append("CPU time per operation per thread (Google Benchmark's cpu_time), median of %d interleaved "
                 "runs. 1 thread: pinned to CPU 0. 2 threads: both CPUs. `arena` = open, allocate an int and "
                 "20 bytes, close (through //interpose:client: calloc+free without poolscope)." % args.reps)
        L.append("")
        L.append("| benchmark | threads | " + " | ".join(c[1] for c in configs) + " |")
        L.append("|---|---|" + "---|" * len(configs))
        rows = [("malloc_free/%d" % s, "malloc+free %d B" % s) for s in args.sizes] + [("arena", "arena int+20 B")]
        floor_rows = [("call_floor/2", "2 empty calls (floor)"), ("call_floor/4", "4 empty calls (floor)")]
        for mode, t in (("st", 1), ("mt", 2)):
            for bench, label in rows + (floor_rows if t == 1 else []):
                name = "%s/threads:%d" % (bench, t)
                base = m("glibc", mode, name)
                cells = []
                for key, _, _, _ in configs:
                    v = m(key, mode, name)
                    cells.append("—" if v is None else "%s (%s)" % (fmt_ns(v), fmt_ratio(v / base) if base else "—"))
                L.append("| %s | %d | %s |" % (label, t, " | ".join(cells)))
        L.append("")
        L.append("`N empty calls (floor)`: calls to functions that do nothing, in a shared library of their own "
                 "(bench/call_floor.c), through the PLT as every call to an interposed allocator goes: 2 is the "
                 "least a malloc+free pair reached that way can cost, 4 an arena round (open, two allocations, "
                 "close). Preloading changes nothing in it (same figure in every column, within noise).")
        L.append("")

        # Thread scaling
        ts = thr_names()
        L.append("## 2. Thread scaling: per-operation time with T threads (ns, CPU time per op per thread), all CPUs")
        L.append("")
        L.append("Same process for every T (not pinned), median of %d runs; `T/1` is the ratio to 1 thread; "
                 "real-time based per-thread figure (wall x T / ops) in brackets." % args.reps)
        L.append("")
        L.append("| allocator | benchmark | " + " | ".join("T=%d" % t for t in ts) + " | " +
                 " | ".join("%d/1" % t for t in ts if t > 1) + " |")
        L.append("|---|---|" + "---|" * (2 * len(ts) - 1))
        for key, cname, _, _ in configs:
            for bench in ["malloc_free/%d" % s for s in args.sizes if s <= 20] + ["arena"]:
                vals = [m(key, "mt", "%s/threads:%d" % (bench, t)) for t in ts]
                rvals = [m(key, "mt", "%s/threads:%d" % (bench, t), real) for t in ts]
                if vals[0] is None:
                    continue
                cells = ["%s [%s]" % (fmt_ns(v), fmt_ns(r * t if r else None)) for v, r, t in zip(vals, rvals, ts)]
                ratios = [fmt_ratio(v / vals[0] if v else None) for v, t in zip(vals, ts) if t > 1]
                L.append("| %s | %s | %s | %s |" % (cname, bench, " | ".join(cells), " | ".join(ratios)))
        L.append("")

        # targets from gbench
        g5, p5 = m("glibc", "st", "malloc_free/5/threads:1"), m("pool1", "st", "malloc_free/5/threads:1")
        f2, f4 = m("pool1", "st", "call_floor/2/threads:1"), m("pool1", "st", "call_floor/4/threads:1")
        if g5 and p5:
            floor = ("; 2 empty calls %s ns: at most %.2fx is possible" % (fmt_ns(f2), g5 / f2)) if f2 else ""
            targets.append(("pooled malloc(5)+free at least 3x faster than glibc alone (1 thread, pinned)",
                            "%.2fx faster (%s vs %s ns)%s" % (g5 / p5, fmt_ns(p5), fmt_ns(g5), floor), g5 / p5 >= 3))
        a = m("pool1", "st", "arena/threads:1")
        if a:
            floor = ("; 4 empty calls %s ns" % fmt_ns(f4)) if f4 else ""
            targets.append(("explicit arena open+allocate+close at most 5 ns (pool=1, 1 thread)",
                            "%s ns%s" % (fmt_ns(a), floor), a <= 5))
        for s in [s for s in args.sizes if s > 64]:
            n = "malloc_free/%d/threads:1" % s
            p0, p1 = m("pool0", "st", n), m("pool1", "st", n)
            if p0 and p1:
                targets.append(("malloc+free %d B (above the pool size) pooled within 10%% of pass-through" % s,
                                "pool=1/pool=0 = %.2fx" % (p1 / p0), p1 / p0 <= 1.10))
        for s in [s for s in args.sizes if s in (5, 20)]:
            n = "malloc_free/%d/threads:1" % s
            p1 = m("pool1", "st", n)
            others = {k: m(k, "st", n) for k in ("glibc", "jemalloc", "tcmalloc", "mimalloc")}
            if p1 and all(others.values()):
                best = min(others, key=others.get)
                targets.append(("pooled malloc+free of %d B faster than glibc, jemalloc, tcmalloc, mimalloc" % s,
                                "pool=1 %s ns; fastest peer %s %s ns (%.2fx)" % (fmt_ns(p1), best, fmt_ns(others[best]),
                                                                              p1 / others[best]),
                                p1 < others[best]))
        for bench in ["malloc_free/5", "arena"]:
            v1 = m("pool1", "mt", bench + "/threads:1")
            for t in [t for t in ts if t > 1]:
                vt = m("pool1", "mt", "%s/threads:%d" % (bench, t))
                if v1 and vt:
                    targets.append(("pooled %s: %d threads within 15%% of 1 thread (per-op time)" % (bench, t),
                                    "%.2fx (%s vs %s ns)" % (vt / v1, fmt_ns(vt), fmt_ns(v1)), vt / v1 <= 1.15))

    if proc:
        cfgs = process_configs(args, None)
        L.append("## 3. Whole processes: wall time, CPU time, peak RSS (ratio to no preload)")
        L.append("")
        L.append("Pinned to CPU 0, median of %d interleaved runs (memcheck: %d). heaptrack: "
                 "`LD_PRELOAD=libheaptrack_preload.so DUMP_HEAPTRACK_OUTPUT=FILE`, the traced run timed, the "
                 "trace interpreted afterwards (untimed). Peak RSS: ru_maxrss of the process (for memcheck, "
                 "valgrind's own)." % (args.reps, min(args.reps, args.memcheck_reps)))
        L.append("")
        for wl in wls:
            L.append("**%s** (%s)" % (wl[0], wl[1]))
            L.append("")
            L.append("| configuration | wall s | wall ratio | CPU s | CPU ratio | peak RSS MiB | RSS ratio | runs |")
            L.append("|---|---|---|---|---|---|---|---|")
            base = proc.get((wl[0], "bare"))
            bw = med([r[0] for r in base]) if base else None
            bc = med([r[1] for r in base]) if base else None
            br = med([r[2] for r in base]) if base else None
            for c, label in cfgs:
                rs = proc.get((wl[0], c))
                if not rs:
                    L.append("| %s | failed | | | | | | 0 |" % label)
                    continue
                w, cp, rss = med([r[0] for r in rs]), med([r[1] for r in rs]), med([r[2] for r in rs])
                L.append("| %s | %.3f | %s | %.3f | %s | %.1f | %s | %d |" % (
                    label, w, fmt_ratio(w / bw if bw else None), cp, fmt_ratio(cp / bc if bc else None),
                    rss / 1024.0, fmt_ratio(rss / br if br else None), len(rs)))
            L.append("")
            hc = notes.get("heaptrack_calls", {}).get(wl[0])
            d = notes.get("defaults", {}).get(wl[0])
            extra = []
            if hc is not None:
                extra.append("heaptrack counted %d calls to allocation functions" % hc)
            if d:
                extra.append("full-defaults report: %s logical allocations, %s pool hits, %d sites, %d leak groups%s"
                             % (d["logical_allocs"], d["pool_hits"], d["sites"], d["leak_groups"],
                                " (tracking not active yet: no sites recorded)" if d["sites"] == 0 else ""))
            if extra:
                L.append("; ".join(extra) + ".")
                L.append("")
            if base:
                def wall(c):
                    rs = proc.get((wl[0], c))
                    return med([r[0] for r in rs]) if rs else None
                p0, dflt, ht = wall("pool0"), wall("defaults"), wall("heaptrack")
                if wl[0] == "python3" and p0:
                    targets.append(("counting only (pool=0 track=0) at most 1.05x on python3 (wall)",
                                    "%.3fx" % (p0 / bw), p0 / bw <= 1.05))
                if dflt and ht and ht > bw:
                    share = (dflt - bw) / (ht - bw)
                    targets.append(("full defaults add at most 1/5 of heaptrack's added time (%s, wall)" % wl[0],
                                    "%.1f%% (%+.3f s vs heaptrack %+.3f s)" % (100 * share, dflt - bw, ht - bw),
                                    share <= 0.2))

    if per_pair:
        labels = [("bare", "glibc alone"), ("jemalloc", "jemalloc"), ("tcmalloc", "tcmalloc"),
                  ("mimalloc", "mimalloc"), ("passthrough", "poolscope pool=0"), ("pooled", "poolscope pool=1")]
        keys = [str(s) for s in args.callgrind_sizes] + ["arena"]
        what = lambda k: "arena round (open, int + 20 B, close)" if k == "arena" else "malloc(%s)+free" % k
        L.append("## 4. Instructions per operation (callgrind, loop included)")
        L.append("")
        L.append("`bench/callgrind_pair.sh` on `bench/malloc_loop` and `bench/arena_loop`: (X(2N) - X(N)) / N with "
                 "N = %d; poolscope with track=0 valgrind=0. Exact: the same on every run." % args.callgrind_n)
        L.append("")
        L.append("| operation | " + " | ".join(l for _, l in labels) + " |")
        L.append("|---|" + "---|" * len(labels))
        for k in keys:
            L.append("| %s | %s |" % (what(k), " | ".join(
                "%.1f" % per_pair[(k, c)] if (k, c) in per_pair else "—" for c, _ in labels)))
        L.append("")
        for k in keys:
            for label in ("pooled", "passthrough"):
                rows = profiles.get((k, label))
                if not rows:
                    continue
                L.append("Per function, %s, %s: instructions per operation (callgrind_annotate of the N and 2N "
                         "runs, differenced; total %.1f):" % (what(k), "pool=1" if label == "pooled" else "pool=0",
                                                             per_pair.get((k, label), float("nan"))))
                L.append("")
                L.append("| function | instructions |")
                L.append("|---|---|")
                for fn, v in rows[:14]:
                    L.append("| `%s` | %.1f |" % (fn, v))
                L.append("")
        if ("5", "pooled") in per_pair:
            v = per_pair[("5", "pooled")]
            targets.append(("pooled malloc(5)+free at most 45 instructions per pair (callgrind)",
                            "%.1f (glibc %.1f, fastest peer %.1f)" % (
                                v, per_pair.get(("5", "bare"), float("nan")),
                                min(per_pair.get(("5", p), float("inf")) for p in ("jemalloc", "tcmalloc", "mimalloc"))),
                            v <= 45))

    L.append("## 5. Targets")
    L.append("")
    L.append("| target | measured | |")
    L.append("|---|---|---|")
    for what, measured, ok in targets:
        L.append("| %s | %s | %s |" % (what, measured, "met" if ok else "**missed**"))
    L.append("")
    if failures:
        L.append("## Failures")
        L.append("")
        for f in failures:
            L.append("- " + f.replace("\n", " "))
        L.append("")
    return "\n".join(L) + "\n", targets


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("output", help="markdown file to write the table to")
    ap.add_argument("--lib", required=True)
    ap.add_argument("--bench", required=True, help="article_bench binary")
    ap.add_argument("--loop", required=True, help="malloc_loop binary")
    ap.add_argument("--arena-loop", required=True, help="arena_loop binary")
    ap.add_argument("--root", default=os.getcwd())
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--reps", type=int)
    ap.add_argument("--memcheck-reps", type=int)
    ap.add_argument("--min-time", type=float)
    ap.add_argument("--scale", type=float, help="whole-process workload size (1 = ~0.5 s bare)")
    ap.add_argument("--sizes", help="comma-separated malloc sizes (default 5,20,100,500,2000,8000)")
    ap.add_argument("--callgrind-n", type=int)
    ap.add_argument("--steps", default="gbench,process,callgrind")
    ap.add_argument("--keep", help="directory for raw results (default: a temporary one, removed)")
    ap.add_argument("--command", default="bench/run_all.sh")
    args = ap.parse_args()
    q = args.quick
    args.reps = args.reps or (3 if q else 5)
    args.memcheck_reps = args.memcheck_reps or (1 if q else 3)
    args.min_time = args.min_time if args.min_time is not None else (0.03 if q else 0.2)
    args.scale = args.scale if args.scale is not None else (0.15 if q else 1.0)
    args.sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else SIZES
    args.callgrind_sizes = [s for s in args.sizes if s in (5, 20)] or args.sizes[:1]
    args.callgrind_n = args.callgrind_n or (20000 if q else 200000)
    args.ncpu = os.cpu_count() or 1
    args.python = "/usr/bin/python3"
    args.bench_dir = os.path.dirname(os.path.abspath(__file__))
    for p in (args.lib, args.bench, args.loop, args.arena_loop):
        if not os.path.exists(p):
            print("run_all: %s: no such file" % p, file=sys.stderr)
            return 2
    args.lib = os.path.realpath(args.lib)
    steps = set(args.steps.split(","))
    for peer, path in list(PEERS.items()) + [("heaptrack", HEAPTRACK_PRELOAD)]:
        if not os.path.exists(path):
            fail("%s is not installed (%s); scripts/setup.sh installs it" % (peer, path))
    work = args.keep or tempfile.mkdtemp(prefix="poolscope_bench.")
    os.makedirs(work, exist_ok=True)
    log("raw results in " + work)
    # Measure copies: the library under bazel-bin may be rebuilt while the harness runs.
    snap = os.path.join(work, "bin")
    os.makedirs(snap, exist_ok=True)
    for attr in ("lib", "bench", "loop", "arena_loop"):
        src = os.path.realpath(getattr(args, attr))
        dst = os.path.join(snap, os.path.basename(src))
        shutil.copy2(src, dst)
        setattr(args, attr, dst)
        if attr == "bench":
            # article_bench's libcall_floor.so (bench/BUILD) goes beside the copy, which looks there too.
            found = glob.glob(os.path.join(os.path.dirname(src), "..", "_solib_*", "*", "libcall_floor.so"))
            found += glob.glob(os.path.join(os.path.dirname(src), "libcall_floor.so"))
            if found:
                shutil.copy2(os.path.realpath(found[0]), os.path.join(snap, "libcall_floor.so"))
    with open(args.lib, "rb") as f:
        args.lib_sha = hashlib.sha256(f.read()).hexdigest()[:16]
    args.lib_mtime = datetime.datetime.fromtimestamp(os.path.getmtime(args.lib)).astimezone().strftime(
        "%Y-%m-%d %H:%M:%S %Z")
    results, notes = {}, {}
    t0 = time.time()
    cpu, real = step_gbench(args, work, results) if "gbench" in steps else ({}, {})
    wls, proc = step_process(args, work, results, notes) if "process" in steps else ([], {})
    per_pair, profiles = step_callgrind(args, work, results) if "callgrind" in steps else ({}, {})
    text, targets = render(args, cpu, real, wls, proc, per_pair, profiles, notes)
    text += "\n_Harness time: %.0f s._\n" % (time.time() - t0)
    with open(args.output, "w") as f:
        f.write(text)
    results["targets"] = targets
    results["failures"] = failures
    results["notes"] = notes
    with open(os.path.splitext(args.output)[0] + ".json", "w") as f:
        json.dump(results, f, indent=1)
    print(text)
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
