#!/usr/bin/python3
"""Checks poolscope reports: complete, and the ledger identities of SPEC.md hold.

Usage: check_report.py [--expect-option KEY=VALUE ...] [--expect-no-errors] REPORT.json ...

Checks, for every report (docs/report-schema.md, SPEC.md "The report"):
  completeness  every top-level section of the schema is present; "schema" is
                "poolscope.report/1"; process.pid, ppid, exe, argv, start_ns, end_ns, reason and
                forked_from are present with the right types (and process.signal, SIGTERM, SIGINT
                or SIGHUP, when reason is "signal"); the counters the identities use
                are integers; by_api has every entry point of the SPEC.
  always        logical.allocs - logical.frees == logical.live_blocks
                real.allocs - real.frees == real.live_blocks   (the schema: "real: the same")
                pool.enabled agrees with the options (off when pool == 0 or pool_size < 0)
  pool off      real.allocs == logical.allocs
                real.frees == logical.frees
                real.by_api == logical.by_api   (skipped when logical.by_api has a nonzero
                                                 poolscope_arena_* key: explicit arenas)
  pool on       real.allocs == logical.allocs - pool.hits + pool.pools_created + pool.spills
                reconciliation.balanced is true, and its equation holds:
                real_live_blocks == unpooled_live_blocks + pools_cached + pools_in_use
  --expect-option KEY=VALUE: options.KEY must equal VALUE (compared as JSON text, or as a string).
  --expect-no-errors: errors.invalid_frees and errors.double_frees are 0 (for programs that never
                free a pointer they do not own: a nonzero count is a false positive of poolscope).

Prints "ok PATH" per good report. On the first failure of a report it prints one line
"FAIL PATH: <identity>: <left side> = X, <right side> = Y" (or what is missing) and goes on with
the next report. Exit status: 0 all good, 1 a report is incomplete or breaks an identity,
2 bad usage or a file that cannot be read or is not JSON.
Standard library only.
"""

import json
import sys

SCHEMA = "poolscope.report/1"

TOP_LEVEL = [
    "schema", "process", "options", "logical", "real", "internal", "pool", "threads",
    "threads_omitted", "sizes", "sites", "leaks", "reconciliation", "errors",
]

# SPEC.md: by_api is keyed by these C names and C++ operators.
ENTRY_POINTS = [
    "malloc", "calloc", "realloc", "reallocarray", "posix_memalign", "aligned_alloc", "memalign",
    "valloc", "pvalloc", "free", "new", "new[]", "delete", "delete[]",
]

LEDGER_FIELDS = ["allocs", "frees", "reallocs", "bytes_requested", "live_blocks", "live_bytes",
                 "by_api"]
# Counters the identities use: must be integers (live_bytes and bytes_requested may be null).
LEDGER_INTEGERS = ["allocs", "frees", "reallocs", "live_blocks"]

POOL_FIELDS = ["enabled", "pool_size", "pools_per_thread", "hits", "misses", "pools_created",
               "pools_reused", "pools_released", "resets_in_place", "pools_cached_at_exit",
               "pools_in_use_at_exit", "spills", "absorbs"]
POOL_INTEGERS = ["hits", "pools_created", "spills", "absorbs"]

RECONCILIATION_FIELDS = ["real_live_blocks", "unpooled_live_blocks", "pools_cached", "pools_in_use",
                         "balanced", "detector_view"]
DETECTOR_FIELDS = ["unfreed_blocks", "unfreed_bytes", "program_leak_blocks", "pool_blocks",
                   "internal_blocks", "verdict"]
ERRORS_FIELDS = ["invalid_frees", "double_frees"]


class Failure(Exception):
    """One broken rule; the message names it and both sides."""


def is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def require(obj, path, fields):
    if not isinstance(obj, dict):
        raise Failure("completeness: %s is %s, not an object" % (path, type(obj).__name__))
    for f in fields:
        if f not in obj:
            raise Failure("completeness: %s.%s is missing" % (path, f))


def require_int(obj, path, fields):
    for f in fields:
        if not is_int(obj[f]):
            raise Failure("completeness: %s.%s must be an integer, got %r" % (path, f, obj[f]))


def equal(identity, left_name, left, right_name, right):
    if left != right:
        raise Failure("%s: %s = %s, %s = %s" % (identity, left_name, fmt(left), right_name, fmt(right)))


def fmt(v):
    if isinstance(v, dict):
        return json.dumps(v, sort_keys=True)
    return repr(v)


def pooling_off(options):
    pool = options.get("pool")
    size = options.get("pool_size")
    if pool in (0, "0", False):
        return True
    return is_int(size) and size < 0


def check_complete(r):
    if not isinstance(r, dict):
        raise Failure("completeness: the report is a JSON %s, not an object" % type(r).__name__)
    require(r, "report", TOP_LEVEL)
    if r["schema"] != SCHEMA:
        raise Failure("completeness: schema = %r, expected %r" % (r["schema"], SCHEMA))
    p = r["process"]
    require(p, "process", ["pid", "ppid", "exe", "argv", "start_ns", "end_ns", "reason", "forked_from"])
    require_int(p, "process", ["pid", "ppid", "start_ns", "end_ns"])
    if not isinstance(p["exe"], str) or not p["exe"]:
        raise Failure("completeness: process.exe must be a non-empty string, got %r" % (p["exe"],))
    if not isinstance(p["argv"], list) or not all(isinstance(a, str) for a in p["argv"]):
        raise Failure("completeness: process.argv must be a list of strings, got %r" % (p["argv"],))
    if p["reason"] not in ("exit", "snapshot", "signal"):
        raise Failure("completeness: process.reason = %r, expected 'exit', 'snapshot' or 'signal'" % (p["reason"],))
    if p["reason"] == "signal" and p.get("signal") not in ("SIGTERM", "SIGINT", "SIGHUP"):
        raise Failure("completeness: process.reason is 'signal', process.signal = %r, expected the "
                      "signal's name" % (p.get("signal"),))
    if p["forked_from"] is not None and not is_int(p["forked_from"]):
        raise Failure("completeness: process.forked_from must be null or a pid, got %r" % (p["forked_from"],))
    if p["end_ns"] < p["start_ns"]:
        raise Failure("completeness: process.end_ns = %d is before process.start_ns = %d"
                      % (p["end_ns"], p["start_ns"]))
    require(r, "options", [])
    require(r["options"], "options", ["pool", "pool_size", "pools"])
    for side in ("logical", "real"):
        require(r[side], side, LEDGER_FIELDS)
        require_int(r[side], side, LEDGER_INTEGERS)
        require(r[side]["by_api"], side + ".by_api", ENTRY_POINTS)
        for k, v in r[side]["by_api"].items():
            if not is_int(v):
                raise Failure("completeness: %s.by_api[%r] must be an integer, got %r" % (side, k, v))
    require(r["internal"], "internal", [])
    require(r["pool"], "pool", POOL_FIELDS)
    require_int(r["pool"], "pool", POOL_INTEGERS)
    if not isinstance(r["pool"]["misses"], dict):
        raise Failure("completeness: pool.misses must be an object, got %r" % (r["pool"]["misses"],))
    if not isinstance(r["threads"], list):
        raise Failure("completeness: threads must be a list")
    require(r["sizes"], "sizes", ["buckets"])
    if not isinstance(r["sites"], list):
        raise Failure("completeness: sites must be a list")
    if not isinstance(r["leaks"], list):
        raise Failure("completeness: leaks must be a list")
    require(r["reconciliation"], "reconciliation", RECONCILIATION_FIELDS)
    require(r["reconciliation"]["detector_view"], "reconciliation.detector_view", DETECTOR_FIELDS)
    require(r["errors"], "errors", ERRORS_FIELDS)


def arena_keys_used(by_api):
    return any(k.startswith("poolscope_arena_") and v for k, v in by_api.items())


def check_identities(r):
    lg, rl, pool, rec = r["logical"], r["real"], r["pool"], r["reconciliation"]
    equal("logical.allocs - logical.frees == logical.live_blocks",
          "logical.allocs - logical.frees", lg["allocs"] - lg["frees"],
          "logical.live_blocks", lg["live_blocks"])
    equal("real.allocs - real.frees == real.live_blocks",
          "real.allocs - real.frees", rl["allocs"] - rl["frees"],
          "real.live_blocks", rl["live_blocks"])
    off = pooling_off(r["options"])
    if r["process"].get("counters_exact") is False:
        # Read while other threads were allocating (a snapshot, or an exit with threads still
        # running): the ledgers may be off by the calls in flight, so only their shape is checked.
        return
    # Every live logical block is in some leak group, when all groups are listed: the groups hold at
    # least logical.live_blocks blocks. (More when the program freed blocks poolscope never handed out,
    # allocated before it loaded or by another allocator: those frees count, their blocks never did.)
    # A fork() child's table also holds blocks of threads fork() stopped: not checked there.
    if r.get("tracked") and r.get("leak_groups_omitted") == 0 and r["process"].get("forked_from") is None:
        grouped = sum(g["blocks"] for g in r["leaks"])
        if grouped < lg["live_blocks"]:
            raise Failure("tracked: every live block is in a leak group: sum(leaks[].blocks) = %d < "
                          "logical.live_blocks = %d" % (grouped, lg["live_blocks"]))
    equal("pool.enabled agrees with options (pool=%r pool_size=%r)"
          % (r["options"].get("pool"), r["options"].get("pool_size")),
          "pool.enabled", pool["enabled"], "expected", not off)
    if off:
        equal("pool=0: real.allocs == logical.allocs",
              "real.allocs", rl["allocs"], "logical.allocs", lg["allocs"])
        equal("pool=0: real.frees == logical.frees",
              "real.frees", rl["frees"], "logical.frees", lg["frees"])
        if not arena_keys_used(lg["by_api"]):
            keys = set(k for k in list(lg["by_api"]) + list(rl["by_api"])
                       if not k.startswith("poolscope_arena_"))
            diff = sorted(k for k in keys if lg["by_api"].get(k) != rl["by_api"].get(k))
            if diff:
                raise Failure("pool=0: real.by_api == logical.by_api: differ at %s: real.by_api = %s, "
                              "logical.by_api = %s"
                              % (", ".join(diff),
                                 fmt({k: rl["by_api"].get(k) for k in diff}),
                                 fmt({k: lg["by_api"].get(k) for k in diff})))
    else:
        expected = lg["allocs"] - pool["hits"] + pool["pools_created"] + pool["spills"]
        equal("pool=1: real.allocs == logical.allocs - pool.hits + pool.pools_created + pool.spills",
              "real.allocs", rl["allocs"],
              "logical.allocs - pool.hits + pool.pools_created + pool.spills (%d - %d + %d + %d)"
              % (lg["allocs"], pool["hits"], pool["pools_created"], pool["spills"]), expected)
        equal("pool=1: reconciliation.balanced is true",
              "reconciliation.balanced", rec["balanced"], "expected", True)
        terms = [rec[k] for k in ("real_live_blocks", "unpooled_live_blocks", "pools_cached", "pools_in_use")]
        if not all(is_int(t) for t in terms):
            raise Failure("pool=1: reconciliation terms must be integers, got real_live_blocks=%r "
                          "unpooled_live_blocks=%r pools_cached=%r pools_in_use=%r" % tuple(terms))
        # A fork() child may inherit a gap from threads that fork stopped mid-call; the report states it
        # as its own term (interrupted_by_fork, zero outside fork children) and the equation includes it.
        fork_gap = rec.get("interrupted_by_fork", 0)
        if not is_int(fork_gap) or (fork_gap != 0 and r["process"].get("forked_from") is None):
            raise Failure("reconciliation.interrupted_by_fork must be 0 outside a fork() child, got %r"
                          % (fork_gap,))
        equal("pool=1: reconciliation.real_live_blocks == unpooled_live_blocks + pools_cached + pools_in_use"
              " + interrupted_by_fork",
              "reconciliation.real_live_blocks", terms[0],
              "unpooled_live_blocks + pools_cached + pools_in_use + interrupted_by_fork (%d + %d + %d + %d)"
              % (terms[1], terms[2], terms[3], fork_gap),
              terms[1] + terms[2] + terms[3] + fork_gap)
    check_verdict(r)


def check_verdict(r):
    """The verdict's figures are the report's: the unfreed blocks, and, when pools hold some of the
    program's blocks, all the blocks the program leaves unfreed (logical.live_blocks), which a reader
    would otherwise take to be only the detector view's program_leak_blocks."""
    view, rec = r["reconciliation"]["detector_view"], r["reconciliation"]
    verdict = view["verdict"]
    n = view["unfreed_blocks"]
    want = "would see %d unfreed block%s" % (n, "" if n == 1 else "s")
    if want not in verdict:
        raise Failure("verdict: %r does not say %r (detector_view.unfreed_blocks)" % (verdict, want))
    live = r["logical"]["live_blocks"]
    pooled = rec.get("pooled_live_blocks", live - rec["unpooled_live_blocks"])
    if is_int(view["pool_blocks"]) and view["pool_blocks"] > 0 and is_int(pooled) and pooled > 0:
        want = "%d more of the program's blocks, so the program leaves %d block%s unfreed" % (
            pooled, live, "" if live == 1 else "s")
        if want not in verdict:
            raise Failure("verdict: %r does not say %r (pooled_live_blocks, logical.live_blocks)"
                          % (verdict, want))


def check_expectations(r, expectations):
    for key, value in expectations:
        if key not in r["options"]:
            raise Failure("options: options.%s is missing (expected %s)" % (key, value))
        got = r["options"][key]
        if json.dumps(got) != value and str(got) != value:
            raise Failure("options: options.%s = %s, expected %s" % (key, json.dumps(got), value))


def check_no_errors(r):
    for f in ERRORS_FIELDS:
        equal("no errors expected: errors.%s == 0" % f, "errors.%s" % f, r["errors"][f], "expected", 0)


def check(report, expectations=(), no_errors=False):
    """Raises Failure on the first broken rule of a parsed report."""
    check_complete(report)
    check_expectations(report, expectations)
    check_identities(report)
    if no_errors:
        check_no_errors(report)


def main(argv):
    expectations = []
    no_errors = False
    paths = []
    args = argv[1:]
    while args:
        a = args.pop(0)
        if a == "--expect-option":
            if not args or "=" not in args[0]:
                print("usage: --expect-option KEY=VALUE", file=sys.stderr)
                return 2
            k, v = args.pop(0).split("=", 1)
            expectations.append((k, v))
        elif a.startswith("--expect-option="):
            kv = a[len("--expect-option="):]
            if "=" not in kv:
                print("usage: --expect-option KEY=VALUE", file=sys.stderr)
                return 2
            k, v = kv.split("=", 1)
            expectations.append((k, v))
        elif a == "--expect-no-errors":
            no_errors = True
        elif a in ("-h", "--help"):
            print(__doc__)
            return 0
        elif a.startswith("-") and a != "-":
            print("check_report.py: unknown flag %s (try --help)" % a, file=sys.stderr)
            return 2
        else:
            paths.append(a)
    if not paths:
        print("usage: check_report.py [--expect-option KEY=VALUE ...] [--expect-no-errors] REPORT.json ...", file=sys.stderr)
        return 2
    status = 0
    for path in paths:
        try:
            with open(path, "rb") as f:
                text = f.read()
            report = json.loads(text.decode("utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as e:
            print("FAIL %s: unreadable: %s" % (path, e))
            status = 2
            continue
        try:
            check(report, expectations, no_errors)
        except Failure as e:
            print("FAIL %s: %s" % (path, e))
            status = max(status, 1)
            continue
        print("ok %s" % path)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv))
