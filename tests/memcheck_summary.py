#!/usr/bin/python3
"""memcheck's leak summary as JSON.

    memcheck_summary.py -- PROGRAM [ARGS...]   runs valgrind --leak-check=full
        --leak-check-heuristics=none --run-libc-freeres=no --run-cxx-freeres=no on it
    memcheck_summary.py --log FILE             parses a log memcheck wrote before
    --as-reachable FUNC (first, either form)   counts the possibly lost blocks of every loss record
        whose stack names FUNC as still reachable (a block whose class depends on the allocator's
        alignment: its owner keeps a pointer to an aligned address inside it)

Prints one JSON object: {"definitely_lost": {"blocks": N, "bytes": N}, "indirectly_lost": ...,
"possibly_lost": ..., "still_reachable": ..., "suppressed": ..., "errors": N}. A run whose heap was
all freed ("no leaks are possible") gives zeros. Exits 1 when the log has no leak summary.
Standard library only.
"""
import json
import re
import subprocess
import sys
import tempfile

KINDS = ["definitely_lost", "indirectly_lost", "possibly_lost", "still_reachable", "suppressed"]
LINE = re.compile(r"==\d+==\s+(definitely lost|indirectly lost|possibly lost|still reachable|suppressed):"
                  r" ([\d,]+) bytes in ([\d,]+) blocks")
ERRORS = re.compile(r"==\d+== ERROR SUMMARY: ([\d,]+) errors")
ALL_FREED = "All heap blocks were freed -- no leaks are possible"

VALGRIND = ["valgrind", "--leak-check=full", "--leak-check-heuristics=none", "--run-libc-freeres=no",
            "--run-cxx-freeres=no"]


def number(text):
    return int(text.replace(",", ""))


RECORD = re.compile(r"==\d+== ([\d,]+) bytes in ([\d,]+) blocks are possibly lost in loss record [\d,]+ of [\d,]+\n"
                    r"((?:==\d+==    (?:at|by) .*\n)+)")


def as_reachable(summary, log, func):
    """Moves the possibly lost blocks of the loss records whose stack names func to still reachable."""
    for m in RECORD.finditer(log):
        if re.search(r"(?:at|by) 0x[0-9A-Fa-f]+: " + re.escape(func) + r" ", m.group(3)) is None:
            continue
        nbytes, blocks = number(m.group(1)), number(m.group(2))
        for kind, sign in (("possibly_lost", -1), ("still_reachable", 1)):
            summary[kind]["blocks"] += sign * blocks
            summary[kind]["bytes"] += sign * nbytes


def parse(log):
    """The summary of a memcheck log, or None when it has none."""
    summary = {k: {"blocks": 0, "bytes": 0} for k in KINDS}
    found = ALL_FREED in log
    for m in LINE.finditer(log):
        summary[m.group(1).replace(" ", "_")] = {"blocks": number(m.group(3)), "bytes": number(m.group(2))}
        found = True
    errors = ERRORS.findall(log)
    if not found or not errors:
        return None
    summary["errors"] = number(errors[-1])
    return summary


def main(argv):
    reachable_from = None
    if len(argv) >= 3 and argv[1] == "--as-reachable":
        reachable_from = argv[2]
        argv = argv[:1] + argv[3:]
    if len(argv) == 3 and argv[1] == "--log":
        with open(argv[2], errors="replace") as f:
            log = f.read()
        source = argv[2]
    elif len(argv) >= 3 and argv[1] == "--":
        with tempfile.NamedTemporaryFile(mode="r", suffix=".vg.log") as f:
            subprocess.run(VALGRIND + ["--log-file=" + f.name] + argv[2:], stdout=subprocess.DEVNULL,
                           check=False)
            log = f.read()
        source = argv[2]
    else:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    summary = parse(log)
    if summary is None:
        print(f"memcheck_summary: {source}: no leak summary in memcheck's output", file=sys.stderr)
        return 1
    if reachable_from is not None:
        as_reachable(summary, log, reachable_from)
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
