#!/usr/bin/python3
"""Unit tests of tests/check_report.py: what it adds to `poolscope check`, and that it delegates.

The identities themselves are tested one by one against `poolscope check` in
tests/tools/check_test.cc. Here: a report the library wrote (tests/testdata/demo_on.json) passes;
a copy with a broken identity fails with the line `poolscope check` prints; the test-specific flags
(--expect-option, --expect-no-errors) pass and fail as documented; unreadable input, bad usage and
a missing poolscope binary are status 2. Runs the checker as a program (exit status and message),
the way the integration tests use it. Standard library only.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
CHECKER = os.path.join(HERE, "check_report.py")
RECORDED = os.path.join(HERE, "testdata", "demo_on.json")
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable


def recorded():
    with open(RECORDED) as f:
        return json.load(f)


class CheckerTest(unittest.TestCase):

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(dir=os.environ.get("TEST_TMPDIR"))
        self.n = 0

    def tearDown(self):
        self.tmp.cleanup()

    def write(self, report, raw=None):
        self.n += 1
        path = os.path.join(self.tmp.name, "r%d.json" % self.n)
        with open(path, "w") as f:
            f.write(raw if raw is not None else json.dumps(report))
        return path

    def run_checker(self, *args, env=None, checker=CHECKER):
        p = subprocess.run([PYTHON, checker] + list(args), stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, universal_newlines=True, env=env)
        return p.returncode, p.stdout + p.stderr

    def assert_ok(self, report, *flags):
        path = self.write(report)
        rc, out = self.run_checker(*(list(flags) + [path]))
        self.assertEqual(rc, 0, out)
        self.assertEqual(out, "ok %s\n" % path)

    def assert_fails(self, report, *needles, flags=()):
        path = self.write(report)
        rc, out = self.run_checker(*(list(flags) + [path]))
        self.assertEqual(rc, 1, "checker accepted a broken report:\n" + out)
        self.assertIn("FAIL %s: " % path, out)
        for needle in needles:
            self.assertIn(needle, out)
        return out

    # --- delegation to `poolscope check` ---------------------------------------------------------
    def test_recorded_report_passes(self):
        self.assert_ok(recorded())

    def test_broken_identity_fails_with_poolscope_checks_line(self):
        r = recorded()
        r["logical"]["live_blocks"] += 1
        lg = r["logical"]
        self.assert_fails(r, "logical.allocs - logical.frees = %d - %d = %d != logical.live_blocks = %d"
                          % (lg["allocs"], lg["frees"], lg["allocs"] - lg["frees"], lg["live_blocks"]))

    def test_missing_field_fails(self):
        r = recorded()
        del r["process"]["pid"]
        self.assert_fails(r, "process.pid is missing")

    # --- what a test expects ---------------------------------------------------------------------
    def test_expect_option(self):
        self.assert_ok(recorded(), "--expect-option", "pool=1", "--expect-option=tag=small")
        self.assert_fails(recorded(), "options.pool = 1, expected 0", flags=("--expect-option", "pool=0"))
        self.assert_fails(recorded(), "options.nope is missing (expected 3)",
                          flags=("--expect-option", "nope=3"))

    def test_expect_no_errors(self):
        r = recorded()
        r["errors"]["double_frees"] = 1
        self.assert_ok(r)  # errors are reported, not an identity ...
        self.assert_fails(r, "errors.double_frees = 1, expected 0", flags=("--expect-no-errors",))
        r = recorded()
        r["errors"]["invalid_frees"] = 2
        self.assert_fails(r, "errors.invalid_frees = 2, expected 0", flags=("--expect-no-errors",))

    def test_identity_and_expectation_both_reported(self):
        r = recorded()
        r["real"]["live_blocks"] += 1
        out = self.assert_fails(r, "real.allocs - real.frees", "options.pool = 1, expected 0",
                                flags=("--expect-option", "pool=0"))
        self.assertNotIn("ok ", out)

    # --- unreadable input, usage, several files ----------------------------------------------------
    def test_not_json_is_status_2(self):
        rc, out = self.run_checker(self.write(None, raw="not json at all"))
        self.assertEqual(rc, 2, out)
        self.assertIn("unreadable", out)
        self.assertIn("not JSON", out)

    def test_missing_file_is_status_2(self):
        rc, out = self.run_checker(os.path.join(self.tmp.name, "nope.json"))
        self.assertEqual(rc, 2, out)
        self.assertIn("nope.json: no such file", out)

    def test_json_array_is_not_a_report(self):
        rc, out = self.run_checker(self.write(None, raw="[1, 2]"))
        self.assertEqual(rc, 2, out)
        self.assertIn("not a poolscope report", out)

    def test_usage(self):
        rc, out = self.run_checker()
        self.assertEqual(rc, 2, out)
        self.assertIn("usage", out)
        rc, out = self.run_checker("--expect-option", "novalue", RECORDED)
        self.assertEqual(rc, 2, out)
        rc, out = self.run_checker("--bogus", RECORDED)
        self.assertEqual(rc, 2, out)

    def test_missing_poolscope_binary_is_status_2(self):
        lone = os.path.join(self.tmp.name, "lone")
        os.mkdir(lone)
        checker = shutil.copy(CHECKER, lone)
        env = {k: v for k, v in os.environ.items() if k not in ("TEST_SRCDIR", "RUNFILES_DIR")}
        env["POOLSCOPE_BIN"] = os.path.join(self.tmp.name, "no_poolscope")
        rc, out = self.run_checker(RECORDED, env=env, checker=checker)
        self.assertEqual(rc, 2, out)
        self.assertIn("poolscope binary is not found", out)

    def test_every_file_is_checked(self):
        good = self.write(recorded())
        bad_report = recorded()
        bad_report["logical"]["live_blocks"] = 0
        bad = self.write(bad_report)
        rc, out = self.run_checker(bad, good)
        self.assertEqual(rc, 1, out)
        self.assertIn("FAIL " + bad, out)
        self.assertIn("ok " + good, out)


if __name__ == "__main__":
    unittest.main(verbosity=2)
