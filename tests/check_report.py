#!/usr/bin/python3
"""Checks poolscope reports: `poolscope check` (the schema and every identity), plus what a test expects.

Usage: check_report.py [--expect-option KEY=VALUE ...] [--expect-no-errors] REPORT.json ...

The schema and the identities are checked by `poolscope check` (report/identities.h; docs/cli.md),
found as $POOLSCOPE_BIN, else tools/poolscope in the Bazel runfiles tree of the test
($TEST_SRCDIR or $RUNFILES_DIR; the test lists //tools:poolscope in its data), else
bazel-bin/tools/poolscope beside this file's tests/ folder. On top of it, what the test asks for:
  --expect-option KEY=VALUE: options.KEY must equal VALUE (compared as JSON text, or as a string).
  --expect-no-errors: errors.invalid_frees and errors.double_frees are 0 (for programs that never
                free a pointer they do not own: a nonzero count is a false positive of poolscope).

Prints "ok PATH" per good report, else "FAIL PATH: <what>" lines (each broken identity as
`poolscope check` names it, or the expectation not met). Exit status: 0 all good, 1 a report is
incomplete, breaks an identity or misses an expectation, 2 bad usage, no poolscope binary, or a
file that cannot be read or is not a poolscope report.
Standard library only.
"""

import json
import os
import subprocess
import sys

USAGE = "usage: check_report.py [--expect-option KEY=VALUE ...] [--expect-no-errors] REPORT.json ..."


def find_poolscope():
    """The poolscope binary, or None."""
    here = os.path.dirname(os.path.abspath(__file__))
    candidates = [os.environ.get("POOLSCOPE_BIN", "")]
    for root in ("TEST_SRCDIR", "RUNFILES_DIR"):
        if os.environ.get(root):
            candidates.append(os.path.join(os.environ[root], "poolscope", "tools", "poolscope"))
    candidates.append(os.path.join(here, "..", "tools", "poolscope"))
    candidates.append(os.path.join(here, "..", "bazel-bin", "tools", "poolscope"))
    for c in candidates:
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    return None


def expectation_failures(report, expectations, no_errors):
    """What the report does not meet of the test's expectations, one sentence each."""
    failures = []
    options = report.get("options", {})
    for key, value in expectations:
        if key not in options:
            failures.append("options.%s is missing (expected %s)" % (key, value))
            continue
        got = options[key]
        if json.dumps(got) != value and str(got) != value:
            failures.append("options.%s = %s, expected %s" % (key, json.dumps(got), value))
    if no_errors:
        for field in ("invalid_frees", "double_frees"):
            got = report.get("errors", {}).get(field)
            if got != 0:
                failures.append("no errors expected: errors.%s = %r, expected 0" % (field, got))
    return failures


def check(poolscope, path, expectations, no_errors):
    """Checks one report; returns its exit status (0, 1 or 2) after printing its lines."""
    p = subprocess.run([poolscope, "check", "--", path], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, universal_newlines=True)
    if p.returncode == 2:
        print("FAIL %s: unreadable: %s" % (path, p.stderr.strip()))
        return 2
    lines = []
    if p.returncode != 0:
        prefix = path + ": "
        for line in p.stdout.splitlines():
            lines.append(line[len(prefix):] if line.startswith(prefix) else line)
        if p.returncode != 1 or not lines:
            lines.append("poolscope check ended with status %d: %s" % (p.returncode, p.stderr.strip()))
    if p.returncode in (0, 1) and (expectations or no_errors):
        with open(path, "rb") as f:
            report = json.loads(f.read().decode("utf-8"))
        lines += expectation_failures(report, expectations, no_errors)
    for line in lines:
        print("FAIL %s: %s" % (path, line))
    if not lines:
        print("ok %s" % path)
    return 1 if lines else 0


def main(argv):
    expectations = []
    no_errors = False
    paths = []
    args = argv[1:]
    while args:
        a = args.pop(0)
        if a == "--expect-option" or a.startswith("--expect-option="):
            kv = args.pop(0) if a == "--expect-option" and args else a[len("--expect-option="):]
            if "=" not in kv:
                print("usage: --expect-option KEY=VALUE", file=sys.stderr)
                return 2
            expectations.append(tuple(kv.split("=", 1)))
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
        print(USAGE, file=sys.stderr)
        return 2
    poolscope = find_poolscope()
    if poolscope is None:
        print("check_report.py: the poolscope binary is not found (set POOLSCOPE_BIN, or list "
              "//tools:poolscope in the test's data)", file=sys.stderr)
        return 2
    status = 0
    for path in paths:
        status = max(status, check(poolscope, path, expectations, no_errors))
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv))
