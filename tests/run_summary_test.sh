#!/bin/bash
# `poolscope run`'s summary leads with what the program loses at exit, in memcheck's classes: for
# leak shapes with lost and possibly lost blocks, its first line after the status line gives the lost blocks and the
# definitely, indirectly and possibly lost blocks (and bytes) memcheck gives for the bare program,
# with pooling on and off; no line calls the blocks a malloc/free-counting detector sees "program
# leaks".
# Args: LIB CHECK_REPORT LEAK_SHAPES MEMCHECK_SUMMARY
set -euo pipefail
lib=$(readlink -f "$1"); prog=$(readlink -f "$3"); summary=$(readlink -f "$4")
poolscope=$(readlink -f "$(dirname "$1")/../tools/poolscope")
command -v valgrind >/dev/null || { echo "FAIL: valgrind is not installed"; exit 1; }
work=${TEST_TMPDIR:-$(mktemp -d)}/run_summary
mkdir -p "$work"
fail=0
for mode in list interior cycle; do
  /usr/bin/python3 "$summary" -- "$prog" "$mode" > "$work/$mode.memcheck.json"
  for pool in on off; do
    "$poolscope" run --lib="$lib" --pool=$pool -o "$work/$mode.$pool.json" -- "$prog" "$mode" > /dev/null 2> "$work/$mode.$pool.err"
    /usr/bin/python3 - "$mode pool=$pool" "$work/$mode.memcheck.json" "$work/$mode.$pool.err" <<'PY' || fail=1
import json, re, sys
label, mc, err = sys.argv[1], json.load(open(sys.argv[2])), open(sys.argv[3]).read().splitlines()
# run's summary: its lines after the status line (the library's own "report written" line and run's
# "exit N; report PATH" come first).
summary = [l for l in err if l.startswith("poolscope: ") and not l.startswith("poolscope: exit ")
           and not l.startswith("poolscope: report written to ")]
bad = []
if not summary:
    bad.append(f"no summary: {err}")
else:
    first = summary[0]
    def fmt_bytes(n):
        return f"{n} B" if n < 1024 else None
    lost = mc["definitely_lost"]["blocks"] + mc["indirectly_lost"]["blocks"]
    want = f"poolscope: the program loses {lost} block{'' if lost == 1 else 's'} at exit: "
    if not first.startswith(want):
        bad.append(f"first line {first!r} does not start {want!r}")
    for kind, words in (("definitely_lost", "definitely lost"), ("indirectly_lost", "indirectly lost"),
                        ("possibly_lost", "possibly lost")):
        m = re.search(words + r" ([\d,]+) \(([^)]*)\)", first)
        if not m:
            bad.append(f"first line names no {words}: {first!r}")
            continue
        blocks = int(m.group(1).replace(",", ""))
        if blocks != mc[kind]["blocks"]:
            bad.append(f"{words}: {blocks} blocks, memcheck {mc[kind]['blocks']}")
        b = fmt_bytes(mc[kind]["bytes"])
        if b is not None and m.group(2) != b:
            bad.append(f"{words}: {m.group(2)}, memcheck {b}")
    if any("program leaks" in l for l in summary):
        bad.append("a line says 'program leaks': " + next(l for l in summary if "program leaks" in l))
for b in bad:
    print(f"FAIL: {label}: {b}")
if not bad:
    print(f"ok: {label}: {summary[0]}")
sys.exit(1 if bad else 0)
PY
  done
done
[ "$fail" -eq 0 ] || exit 1
echo PASS
