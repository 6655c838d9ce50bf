#!/bin/bash
# README.md's samples (the main job's output, a report's sections) are what the current build prints,
# figures aside: scripts/readme_samples.py --check. When this fails, run
# `scripts/readme_samples.py --write` and read the change.
# Args: README_SAMPLES_PY README POOLSCOPE DEMO LIB
set -euo pipefail
exec /usr/bin/python3 "$1" --check --readme "$2" --poolscope "$3" --demo "$4" --lib "$5"
