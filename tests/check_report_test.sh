#!/bin/bash
# Runs the unit tests of tests/check_report.py with the system python3 (no Bazel python toolchain).
exec /usr/bin/python3 "$(dirname "$0")/check_report_test.py"
