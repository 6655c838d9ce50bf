#!/usr/bin/python3
"""Unit tests of tests/check_report.py: small hand-written reports, one per broken rule.

Every identity the checker enforces has a report here that breaks it, so a checker that stopped
checking would fail this test. Runs the checker as a program (exit status and message), the way
the integration tests use it. Standard library only.
"""

import copy
import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
CHECKER = os.path.join(HERE, "check_report.py")
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable

BY_API_KEYS = ["malloc", "calloc", "realloc", "reallocarray", "posix_memalign", "aligned_alloc",
               "memalign", "valloc", "pvalloc", "free", "new", "new[]", "delete", "delete[]",
               "poolscope_arena_alloc", "poolscope_arena_close"]


def by_api(**counts):
    d = {k: 0 for k in BY_API_KEYS}
    for k, v in counts.items():
        d[{"new_arr": "new[]", "delete_arr": "delete[]"}.get(k, k)] = v
    return d


POOLED_VERDICT = ("A malloc/free-counting leak detector would see 10 unfreed blocks: 6 are the program's own "
                  "and 4 are poolscope's pools (3 cached, 1 in use), which are not leaks themselves but hold "
                  "4 more of the program's blocks, so the program leaves 10 blocks unfreed, as it would "
                  "without pooling (drain_at_exit=1 releases the cached pools).")


def pooled_report():
    """A consistent report with pooling on (the example of docs/report-schema.md, made to add up)."""
    return {
        "schema": "poolscope.report/1",
        "process": {"pid": 4242, "ppid": 4241, "exe": "/usr/bin/python3.11", "argv": ["python3", "x.py"],
                    "start_ns": 1764686000000000000, "end_ns": 1764686000500000000,
                    "reason": "exit", "forked_from": None},
        "options": {"pool": 1, "pool_size": 64, "pools": 4, "tag": "small", "malloc_align": 16,
                    "track": 1, "stack_depth": 16, "report": "/abs/poolscope.%e.%p.json",
                    "drain_at_exit": 0, "snapshot_interval": 0, "quiet": 0, "leak_exitcode": 0,
                    "valgrind": 1, "help": 0},
        "logical": {"allocs": 1000, "frees": 990, "reallocs": 7, "bytes_requested": 123456,
                    "live_blocks": 10, "live_bytes": 640,
                    "by_api": by_api(malloc=900, calloc=50, realloc=12, free=995, new=40,
                                     new_arr=10, delete=40, delete_arr=10)},
        # 1000 - 880 hits + 10 pools + 0 spills = 130
        "real": {"allocs": 130, "frees": 120, "reallocs": 7, "bytes_requested": 99999,
                 "live_blocks": 10, "live_bytes": 700,
                 "by_api": by_api(malloc=20, calloc=50, realloc=12, posix_memalign=10, free=120,
                                  new=40, new_arr=10, delete=40, delete_arr=10)},
        "internal": {"mmaps": 3, "munmaps": 0, "mapped_bytes": 1048576, "bootstrap_allocs": 2,
                     "bootstrap_bytes": 64, "passthrough_allocs": 0, "passthrough_frees": 0},
        "pool": {"enabled": True, "pool_size": 64, "pools_per_thread": 4, "hits": 880,
                 "misses": {"too_large": 100, "alignment": 0, "pool_full": 0, "untagged": 0, "disabled": 0},
                 "pools_created": 10, "pools_reused": 40, "pools_released": 6, "resets_in_place": 700,
                 "pools_cached_at_exit": 3, "pools_in_use_at_exit": 1, "spills": 0, "absorbs": 0},
        "threads": [{"tid": 4242, "name": "python3", "ended": False, "logical": {"allocs": 1, "frees": 1},
                     "real": {"allocs": 1, "frees": 1}, "pool": {"hits": 0, "pools_created": 0}}],
        "threads_omitted": 0,
        "sizes": {"buckets": [{"le": 8, "count": 10}], "pool_size": 64, "at_or_below_pool_size": 10,
                  "total": 10, "share_at_or_below_pool_size": 1.0},
        "sites": [],
        "leaks": [],
        # 10 real live = 6 unpooled + 3 cached + 1 in use
        "reconciliation": {"real_live_blocks": 10, "unpooled_live_blocks": 6, "pools_cached": 3,
                           "pools_in_use": 1, "balanced": True,
                           "detector_view": {"unfreed_blocks": 10, "unfreed_bytes": 1000,
                                             "program_leak_blocks": 6, "pool_blocks": 4,
                                             "internal_blocks": 0, "verdict": POOLED_VERDICT}},
        "errors": {"invalid_frees": 0, "double_frees": 0, "cases": []},
    }


def passthrough_report():
    """A consistent report with pool=0: both ledgers equal, entry point by entry point."""
    r = pooled_report()
    r["options"]["pool"] = 0
    r["real"] = copy.deepcopy(r["logical"])
    r["pool"].update({"enabled": False, "hits": 0, "pools_created": 0, "pools_reused": 0,
                      "pools_released": 0, "resets_in_place": 0, "pools_cached_at_exit": 0,
                      "pools_in_use_at_exit": 0})
    r["reconciliation"].update({"real_live_blocks": 10, "unpooled_live_blocks": 10, "pools_cached": 0,
                                "pools_in_use": 0, "balanced": True})
    return r


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

    def run_checker(self, *args):
        p = subprocess.run([PYTHON, CHECKER] + list(args), stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, universal_newlines=True)
        return p.returncode, p.stdout + p.stderr

    def assert_ok(self, report, *flags):
        rc, out = self.run_checker(*(list(flags) + [self.write(report)]))
        self.assertEqual(rc, 0, out)
        self.assertTrue(out.startswith("ok "), out)

    def assert_fails(self, report, *needles, flags=()):
        rc, out = self.run_checker(*(list(flags) + [self.write(report)]))
        self.assertEqual(rc, 1, "checker accepted a broken report:\n" + out)
        self.assertIn("FAIL", out)
        for needle in needles:
            self.assertIn(needle, out)
        return out

    # --- good reports -------------------------------------------------------------------------
    def test_pooled_report_passes(self):
        self.assert_ok(pooled_report())

    def test_passthrough_report_passes(self):
        self.assert_ok(passthrough_report())

    def test_negative_pool_size_counts_as_off(self):
        r = passthrough_report()
        r["options"]["pool"] = 1
        r["options"]["pool_size"] = -1
        self.assert_ok(r)

    def test_verdict_must_state_the_reports_figures(self):
        r = pooled_report()
        r["reconciliation"]["detector_view"]["verdict"] = POOLED_VERDICT.replace("would see 10", "would see 9")
        self.assert_fails(r, "verdict", "would see 10 unfreed blocks")
        r = pooled_report()
        r["reconciliation"]["detector_view"]["verdict"] = POOLED_VERDICT.replace("leaves 10", "leaves 11")
        self.assert_fails(r, "verdict", "leaves 10 blocks unfreed")
        r = pooled_report()
        r["reconciliation"]["detector_view"]["verdict"] = POOLED_VERDICT.split(", which")[0] + "."
        self.assert_fails(r, "verdict", "leaves 10 blocks unfreed")

    def test_expect_option(self):
        self.assert_ok(passthrough_report(), "--expect-option", "pool=0", "--expect-option", "tag=small")
        self.assert_fails(passthrough_report(), "options.pool = 0, expected 1",
                          flags=("--expect-option", "pool=1"))

    # --- completeness ---------------------------------------------------------------------------
    def test_each_missing_top_level_section_fails(self):
        for section in ["schema", "process", "options", "logical", "real", "internal", "pool",
                        "threads", "threads_omitted", "sizes", "sites", "leaks", "reconciliation",
                        "errors"]:
            with self.subTest(section=section):
                r = pooled_report()
                del r[section]
                self.assert_fails(r, "report.%s is missing" % section)

    def test_wrong_schema_fails(self):
        r = pooled_report()
        r["schema"] = "poolscope.report/2"
        self.assert_fails(r, "schema", "poolscope.report/2")

    def test_each_missing_process_field_fails(self):
        for field in ["pid", "ppid", "exe", "argv", "start_ns", "end_ns", "reason", "forked_from"]:
            with self.subTest(field=field):
                r = pooled_report()
                del r["process"][field]
                self.assert_fails(r, "process.%s is missing" % field)

    def test_bad_process_values_fail(self):
        cases = [("pid", "4242"), ("reason", "crash"), ("forked_from", "1"), ("argv", "python3"),
                 ("exe", ""), ("end_ns", 1)]
        for field, value in cases:
            with self.subTest(field=field):
                r = pooled_report()
                r["process"][field] = value
                self.assert_fails(r, "process.")

    def test_signal_reason_needs_the_signal_name(self):
        r = pooled_report()
        r["process"]["reason"] = "signal"
        self.assert_fails(r, "process.signal")
        r["process"]["signal"] = "SIGKILL"
        self.assert_fails(r, "process.signal", "SIGKILL")
        r["process"]["signal"] = "SIGTERM"
        self.assert_ok(r)

    def test_missing_ledger_field_fails(self):
        for side in ("logical", "real"):
            for field in ["allocs", "frees", "reallocs", "bytes_requested", "live_blocks", "live_bytes",
                          "by_api"]:
                with self.subTest(side=side, field=field):
                    r = pooled_report()
                    del r[side][field]
                    self.assert_fails(r, "%s.%s is missing" % (side, field))

    def test_missing_entry_point_fails(self):
        r = passthrough_report()
        del r["logical"]["by_api"]["pvalloc"]
        self.assert_fails(r, "logical.by_api.pvalloc is missing")

    def test_missing_pool_and_reconciliation_fields_fail(self):
        for field in ["hits", "pools_created", "spills", "misses", "enabled"]:
            with self.subTest(field=field):
                r = pooled_report()
                del r["pool"][field]
                self.assert_fails(r, "pool.%s is missing" % field)
        r = pooled_report()
        del r["reconciliation"]["balanced"]
        self.assert_fails(r, "reconciliation.balanced is missing")
        r = pooled_report()
        del r["reconciliation"]["detector_view"]["pool_blocks"]
        self.assert_fails(r, "detector_view.pool_blocks is missing")

    def test_non_integer_counter_fails(self):
        r = pooled_report()
        r["logical"]["allocs"] = 1000.0
        self.assert_fails(r, "logical.allocs must be an integer")

    # --- identities -----------------------------------------------------------------------------
    def test_live_blocks_identity(self):
        r = pooled_report()
        r["logical"]["live_blocks"] = 11
        self.assert_fails(r, "logical.allocs - logical.frees == logical.live_blocks",
                          "logical.allocs - logical.frees = 10", "logical.live_blocks = 11")

    def test_tracked_leak_groups_hold_every_live_block(self):
        r = pooled_report()
        r["tracked"] = True
        r["leak_groups_omitted"] = 0
        group = lambda n: {"blocks": n, "bytes": 64 * n, "pooled_blocks": 0, "stack": []}
        r["leaks"] = [group(6), group(4)]
        self.assert_ok(r)
        r["leaks"] = [group(6), group(6)]  # frees of blocks poolscope never handed out: more in groups
        self.assert_ok(r)
        r["leaks"] = [group(6), group(3)]  # a live block missing from every group
        self.assert_fails(r, "every live block is in a leak group", "sum(leaks[].blocks) = 9",
                          "logical.live_blocks = 10")
        r["leak_groups_omitted"] = 2  # groups not listed: nothing to check
        self.assert_ok(r)

    def test_real_live_blocks_identity(self):
        r = pooled_report()
        r["real"]["live_blocks"] = 9
        self.assert_fails(r, "real.allocs - real.frees == real.live_blocks",
                          "real.allocs - real.frees = 10", "real.live_blocks = 9")

    def test_pool0_allocs_identity(self):
        r = passthrough_report()
        r["real"]["allocs"] = 1001
        r["real"]["frees"] = 991  # keep real.live_blocks consistent: only the identity breaks
        self.assert_fails(r, "pool=0: real.allocs == logical.allocs", "real.allocs = 1001",
                          "logical.allocs = 1000")

    def test_inexact_snapshot_skips_only_the_identities(self):
        # A snapshot read while other threads allocated may be off by the calls in flight.
        r = passthrough_report()
        r["real"]["allocs"] = 1001
        r["real"]["frees"] = 991
        r["process"]["counters_exact"] = False
        self.assert_ok(r)
        r["process"]["counters_exact"] = True
        self.assert_fails(r, "pool=0: real.allocs == logical.allocs")
        # Completeness is still required.
        r["process"]["counters_exact"] = False
        del r["logical"]["by_api"]
        self.assert_fails(r, "by_api")

    def test_pool0_frees_identity(self):
        r = passthrough_report()
        r["real"]["frees"] = 989
        r["real"]["live_blocks"] = 11
        self.assert_fails(r, "pool=0: real.frees == logical.frees", "real.frees = 989",
                          "logical.frees = 990")

    def test_pool0_by_api_identity(self):
        r = passthrough_report()
        r["real"]["by_api"]["malloc"] = 899
        r["real"]["by_api"]["posix_memalign"] = 1
        out = self.assert_fails(r, "pool=0: real.by_api == logical.by_api", "malloc", "posix_memalign")
        self.assertIn('"malloc": 899', out)
        self.assertIn('"malloc": 900', out)

    def test_pool0_by_api_missing_key_on_real_side(self):
        r = passthrough_report()
        r["logical"]["by_api"]["extra_entry"] = 3
        self.assert_fails(r, "pool=0: real.by_api == logical.by_api", "extra_entry")

    def test_pool0_by_api_skipped_with_explicit_arenas(self):
        r = passthrough_report()
        r["logical"]["by_api"]["poolscope_arena_alloc"] = 5
        r["real"]["by_api"]["malloc"] = 905  # arena blocks fell back to malloc
        self.assert_ok(r)

    def test_pool0_by_api_not_skipped_with_zero_arena_keys(self):
        r = passthrough_report()
        r["real"]["by_api"]["malloc"] = 905
        self.assert_fails(r, "pool=0: real.by_api == logical.by_api")

    def test_pool_enabled_must_match_options(self):
        r = passthrough_report()
        r["pool"]["enabled"] = True
        self.assert_fails(r, "pool.enabled agrees with options", "pool.enabled = True")
        r = pooled_report()
        r["pool"]["enabled"] = False
        self.assert_fails(r, "pool.enabled agrees with options", "pool.enabled = False")

    def test_pool1_allocs_identity(self):
        r = pooled_report()
        r["pool"]["hits"] = 879
        out = self.assert_fails(
            r, "pool=1: real.allocs == logical.allocs - pool.hits + pool.pools_created + pool.spills",
            "real.allocs = 130")
        self.assertIn("(1000 - 879 + 10 + 0) = 131", out)

    def test_pool1_allocs_identity_counts_spills(self):
        r = pooled_report()
        r["pool"]["spills"] = 2
        self.assert_fails(r, "pool.spills", "real.allocs = 130", "= 132")
        r["real"]["allocs"] = 132
        r["real"]["frees"] = 122
        self.assert_ok(r)

    def test_pool1_unbalanced_fails(self):
        r = pooled_report()
        r["reconciliation"]["balanced"] = False
        self.assert_fails(r, "reconciliation.balanced is true", "reconciliation.balanced = False")

    def test_pool1_equation_checked_even_when_flag_says_balanced(self):
        r = pooled_report()
        r["reconciliation"]["pools_cached"] = 4
        self.assert_fails(r, "real_live_blocks == unpooled_live_blocks + pools_cached + pools_in_use",
                          "reconciliation.real_live_blocks = 10", "(6 + 4 + 1 + 0) = 11")

    def test_pool1_null_reconciliation_term_fails(self):
        r = pooled_report()
        r["reconciliation"]["unpooled_live_blocks"] = None
        self.assert_fails(r, "reconciliation terms must be integers")

    def test_expect_no_errors(self):
        r = pooled_report()
        r["errors"]["double_frees"] = 1
        self.assert_ok(r)  # errors are reported, not an identity ...
        self.assert_fails(r, "errors.double_frees", flags=("--expect-no-errors",))  # ... unless asked
        r = pooled_report()
        r["errors"]["invalid_frees"] = 2
        self.assert_fails(r, "errors.invalid_frees = 2", flags=("--expect-no-errors",))

    # --- unreadable input and several files -------------------------------------------------------
    def test_not_json_is_status_2(self):
        rc, out = self.run_checker(self.write(None, raw="not json at all"))
        self.assertEqual(rc, 2, out)
        self.assertIn("unreadable", out)

    def test_truncated_is_status_2(self):
        text = json.dumps(pooled_report())
        rc, out = self.run_checker(self.write(None, raw=text[: len(text) // 2]))
        self.assertEqual(rc, 2, out)

    def test_missing_file_is_status_2(self):
        rc, out = self.run_checker(os.path.join(self.tmp.name, "nope.json"))
        self.assertEqual(rc, 2, out)
        self.assertIn("nope.json", out)

    def test_json_array_is_incomplete(self):
        rc, out = self.run_checker(self.write(None, raw="[1, 2]"))
        self.assertEqual(rc, 1, out)
        self.assertIn("not an object", out)

    def test_no_arguments_is_usage(self):
        rc, out = self.run_checker()
        self.assertEqual(rc, 2, out)
        self.assertIn("usage", out)

    def test_every_file_is_checked(self):
        good = self.write(pooled_report())
        bad_report = pooled_report()
        bad_report["logical"]["live_blocks"] = 0
        bad = self.write(bad_report)
        rc, out = self.run_checker(bad, good)
        self.assertEqual(rc, 1, out)
        self.assertIn("FAIL " + bad, out)
        self.assertIn("ok " + good, out)


if __name__ == "__main__":
    unittest.main(verbosity=2)
