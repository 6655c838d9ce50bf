#!/bin/bash
# File: tests/tools/html_browser_test.sh
#
# Renders `poolscope report --format=html` of a recorded report in headless Chromium and checks the
# screenshot: the PNG exists, is 1200x1600 (read from its IHDR), and is not blank (its decoded
# pixels hold many distinct colours). Fails, not skips, when chromium is missing: install it with
# `apt-get install -y chromium`.
set -u
POOLSCOPE="$PWD/tools/poolscope"
REPORT="$PWD/tests/testdata/report_on.json"
T="$(mktemp -d "${TEST_TMPDIR:-/tmp}/html_test.XXXXXX")"
CHROMIUM="$(command -v chromium || command -v chromium-browser || true)"
if [ -z "$CHROMIUM" ]; then
  echo "FAIL: chromium is not installed (apt-get install -y chromium)" >&2
  exit 1
fi
"$POOLSCOPE" report --format=html "$REPORT" >"$T/report.html" || { echo "FAIL: poolscope report" >&2; exit 1; }
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
rm -rf "$T"
exit $status
