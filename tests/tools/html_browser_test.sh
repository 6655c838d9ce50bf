#!/bin/bash
# File: tests/tools/html_browser_test.sh
#
# Renders `poolscope report --format=html` of the recorded pooled demo run in headless Chromium.
# Checks the DOM Chromium built from the page: every section is there (the two charts with their
# axis titles, the flame graph's SVG with its frames, the leak table's folded <details> stacks, the
# call-site table with its rows, the timeline's live-bytes lines and axis titles, given to a copy of
# the report; in live blocks for a copy without bytes) and nothing scripted; then the comparison
# page of `diff --html` (its table, both runs' lines on one chart). Then checks the screenshot: the
# PNG exists, is 1200x1600 (read from its IHDR), and is not blank (its decoded pixels hold many
# distinct colours). With SCREENSHOT_OUT=PATH set, the screenshot is also copied there (README's
# image is made so). Fails, not skips, when chromium is missing: install it with
# `apt-get install -y chromium`.
set -u
POOLSCOPE="$PWD/tools/poolscope"
REPORT="$PWD/tests/testdata/demo_on.json"
T="$(mktemp -d "${TEST_TMPDIR:-/tmp}/html_test.XXXXXX")"
CHROMIUM="$(command -v chromium || command -v chromium-browser || true)"
if [ -z "$CHROMIUM" ]; then
  echo "FAIL: chromium is not installed (apt-get install -y chromium)" >&2
  exit 1
fi
# The recorded report predates the timeline: give a copy one (a rise and a fall of live blocks and
# bytes), and another copy the same timeline without bytes (a track=0 run's).
python3 - "$REPORT" "$T/report.json" "$T/blocks.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
live, real = d["logical"]["live_blocks"], d["real"]["live_blocks"]
pools = d["pool"]["pools_cached_at_exit"] + d["pool"]["pools_in_use_at_exit"]
points = [{"t_ms": 20 * i, "logical_live_blocks": live + 4000 * min(i, 20 - i),
           "real_live_blocks": real + 1500 * min(i, 20 - i), "pools": pools + 500 * min(i, 20 - i),
           "rss_kib": 4096 + 600 * min(i, 20 - i),
           "logical_live_bytes": 64 * (live + 4000 * min(i, 20 - i)),
           "real_live_bytes": 80 * (real + 1500 * min(i, 20 - i))} for i in range(21)]
d["timeline"] = {"interval_ms": 20, "points": points}
json.dump(d, open(sys.argv[2], "w"))
for p in points:
    p["logical_live_bytes"] = p["real_live_bytes"] = None
json.dump(d, open(sys.argv[3], "w"))
PY
# Without bytes the chart draws live blocks (checked in the page as written: Chromium is for the
# rest).
"$POOLSCOPE" report --format=html "$T/blocks.json" >"$T/blocks.html" || { echo "FAIL: poolscope report" >&2; exit 1; }
python3 - "$T/blocks.html" <<'PY' || exit 1
import sys
page = open(sys.argv[1], encoding="utf-8").read()
chart = page[page.find('id="timeline"'):]
chart = chart[:chart.find("</section>")]
for want in ("logical live blocks", "real live blocks", ">live blocks (count)<"):
    if want not in chart:
        sys.exit(f"FAIL: a timeline without bytes is not drawn in blocks: no {want!r}")
if "live bytes" in chart:
    sys.exit("FAIL: a timeline without bytes draws bytes")
PY
REPORT="$T/report.json"
"$POOLSCOPE" report --format=html "$REPORT" >"$T/report.html" || { echo "FAIL: poolscope report" >&2; exit 1; }
CHROMIUM_FLAGS=(--headless --no-sandbox --disable-gpu --disable-quic --no-first-run
  --disable-background-networking --disable-component-update --disable-sync)
timeout 120 "$CHROMIUM" "${CHROMIUM_FLAGS[@]}" --user-data-dir="$(mktemp -d "$T/profile.XXXXXX")" \
  --dump-dom "file://$T/report.html" >"$T/dom.html" 2>"$T/dom.log"
python3 - "$T/dom.html" <<'PY' || { tail -5 "$T/dom.log" >&2; exit 1; }
import re, sys
dom = open(sys.argv[1], encoding="utf-8").read()
def section(marker):
    # From the section's id to the next element with an id: the section's own content.
    start = dom.find(marker)
    if start < 0:
        sys.exit(f"FAIL: the rendered page has no section {marker}")
    end = dom.find(' id="', start + len(marker))
    return dom[start:] if end < 0 else dom[start:end]
checks = [
    ('id="ledgers"', 'class="axis-title"', "the ledger chart's axis title"),
    ('id="sizes"', 'class="axis-title"', "the size histogram's axis titles"),
    ('id="sizes"', 'class="tick"', "the size histogram's rotated tick labels"),
    ('id="flame"', '<svg class="flame"', "the flame graph's SVG"),
    ('id="flame"', '<g class="frame"><title>', "the flame graph's frames with tooltips"),
    ('id="leaks"', '<details class="stack"><summary>', "the leak table's folded stacks"),
    ('id="sites"', '<table class="sites">', "the call-site table"),
    ('id="timeline"', '<polyline class="series"', "the timeline's lines"),
    ('id="timeline"', 'class="axis-title"', "the timeline's axis titles"),
    ('id="timeline"', '<title>logical live bytes</title>', "the timeline's logical live bytes"),
    ('id="timeline"', '<title>real live bytes</title>', "the timeline's real live bytes"),
    ('id="timeline"', '>live bytes</text>', "the timeline's bytes axis title"),
    ('id="timeline"', '>resident set (bytes)</text>', "the timeline's resident-set axis title"),
]
for marker, inner, what in checks:
    if inner not in section(marker):
        sys.exit(f"FAIL: the rendered page lacks {what} ({inner} in {marker})")
sites = section('<table class="sites">')
rows = sites[:sites.find("</table>")].count("<tr>") - 1
if rows != 20:
    sys.exit(f"FAIL: the call-site table has {rows} rows, expected 20 (the demo report has 27 sites)")
if "<script" in dom.lower():
    sys.exit("FAIL: the page holds a script")
print("every section present; call-site table of", rows, "rows")
PY
timeout 120 "$CHROMIUM" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
  --disable-background-networking --disable-component-update --disable-sync \
  --user-data-dir="$(mktemp -d "$T/profile.XXXXXX")" --window-size=1200,1600 \
  --screenshot="$T/shot.png" "file://$T/report.html" >"$T/chromium.log" 2>&1
if [ ! -s "$T/shot.png" ]; then
  echo "FAIL: no screenshot; chromium said:" >&2
  tail -20 "$T/chromium.log" >&2
  exit 1
fi
python3 - "$T/shot.png" <<'PY'
import struct, sys, zlib
data = open(sys.argv[1], "rb").read()
assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
pos, chunks = 8, []
while pos < len(data):
    length, kind = struct.unpack(">I4s", data[pos:pos + 8])
    chunks.append((kind, data[pos + 8:pos + 8 + length]))
    pos += 12 + length
width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", chunks[0][1])
assert chunks[0][0] == b"IHDR"
if (width, height) != (1200, 1600):
    sys.exit(f"FAIL: screenshot is {width}x{height}, expected 1200x1600")
assert depth == 8 and color in (2, 6) and interlace == 0, (depth, color, interlace)
raw = zlib.decompress(b"".join(body for kind, body in chunks if kind == b"IDAT"))
bpp = 3 if color == 2 else 4
stride = width * bpp
colors, previous, pos = set(), bytearray(stride), 0
for _ in range(height):
    kind, line = raw[pos], bytearray(raw[pos + 1:pos + 1 + stride])
    pos += 1 + stride
    for i in range(stride):
        a = line[i - bpp] if i >= bpp else 0
        b = previous[i]
        c = previous[i - bpp] if i >= bpp else 0
        if kind == 1: line[i] = (line[i] + a) & 255
        elif kind == 2: line[i] = (line[i] + b) & 255
        elif kind == 3: line[i] = (line[i] + (a + b) // 2) & 255
        elif kind == 4:
            p = a + b - c
            pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
    for i in range(0, stride, bpp * 7):
        colors.add(bytes(line[i:i + 3]))
    previous = line
if len(colors) < 20:
    sys.exit(f"FAIL: the screenshot looks blank ({len(colors)} distinct colours)")
print(f"screenshot {width}x{height}, {len(colors)} distinct colours sampled")
PY
status=$?
if [ "$status" = 0 ] && [ -n "${SCREENSHOT_OUT:-}" ]; then cp "$T/shot.png" "$SCREENSHOT_OUT"; fi
# The comparison page (`diff --html`) of the same report against itself, one run shifted: its table
# and one chart with both runs' lines, as Chromium builds it.
if [ "$status" = 0 ]; then
  "$POOLSCOPE" diff --html="$T/compare.html" "$REPORT" "$REPORT" >"$T/diff.out" 2>"$T/diff.err" ||
    { echo "FAIL: poolscope diff --html: $(cat "$T/diff.err")" >&2; status=1; }
fi
if [ "$status" = 0 ]; then
  timeout 120 "$CHROMIUM" "${CHROMIUM_FLAGS[@]}" --user-data-dir="$(mktemp -d "$T/profile.XXXXXX")" \
    --dump-dom "file://$T/compare.html" >"$T/compare_dom.html" 2>"$T/compare_dom.log"
  python3 - "$T/compare_dom.html" <<'PY' || status=1
import sys
dom = open(sys.argv[1], encoding="utf-8").read()
table = dom.find('id="table"')
chart = dom.find('id="timeline"')
if table < 0 or "logical allocations" not in dom[table:chart]:
    sys.exit("FAIL: the comparison page has no table")
if chart < 0 or dom[chart:].count("<polyline") != 6:
    sys.exit("FAIL: the comparison page's chart lacks the two runs' six lines")
for label in ("A: logical live bytes", "B: real live bytes", "B: resident set (right axis)"):
    if label not in dom[chart:]:
        sys.exit(f"FAIL: the comparison page's chart lacks {label!r}")
if "<script" in dom.lower():
    sys.exit("FAIL: the comparison page holds a script")
print("comparison page: table and both runs' timelines")
PY
fi
rm -rf "$T"
exit $status
