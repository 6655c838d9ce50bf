#!/bin/bash
# File: tests/tools/html_browser_test.sh
#
# The HTML pages in headless Chromium, from reports the preload library writes in this test:
# html_leaks (tests/tools/html_leaks.c: blocks of every reachability class, some allocated by glibc
# for it) run under `poolscope run`, and the demo workload run twice by `poolscope compare --html`.
# Each page is given to Chromium twice over: as written (no script in it; a screenshot), and as a
# copy with a probe script appended that reads the rendered page (layout, computed styles), clicks
# the flame graph's switch and writes what it found into the DOM that --dump-dom prints. The
# figures expected come from the reports' JSON. Checked:
#   1. the page leads with what the program loses: #loss is the first section and the topmost, its
#      four cards the four classes of `reachability`, blocks and bytes; #detector follows, its
#      counting detector's figure "unfreed blocks outside pools" (detector_view.program_leak_blocks),
#      no label calling such blocks leaks; a report without a scan says so (the recorded demo_on.json);
#   2. the flame graph shows the lost bytes (definitely + indirectly + possibly lost) at first, all
#      bytes live at exit once its switch is clicked;
#   3. each call site is named by its first frame outside libc, the loader and libpoolscope.so (the
#      callers of strdup, printf, fputs and fopen), as derived here from the report's sites;
#   4. each ledger once: one ledger table, and each of its figures once in the page's text (demo);
#   5. the comparison page: its table a <table> (no <pre>), six timeline lines of six colours, two
#      dash patterns (one per run), three marker shapes (one per measure), six legend entries.
# Then the screenshot of the demo's page: a 1200x1600 PNG, not blank. With SCREENSHOT_OUT=PATH set,
# the screenshot is also copied there (README's image is made so). Fails, not skips, when chromium
# is missing: install it with `apt-get install -y chromium`.
set -u
POOLSCOPE="$PWD/tools/poolscope"
PY=/usr/bin/python3
T="$(mktemp -d "${TEST_TMPDIR:-/tmp}/html_test.XXXXXX")"

unset POOLSCOPE_LIB POOLSCOPE_OPTIONS
CHROMIUM="$(command -v chromium || command -v chromium-browser || true)"
if [ -z "$CHROMIUM" ]; then
  echo "FAIL: chromium is not installed (apt-get install -y chromium)" >&2
  exit 1
fi
fail() { echo "FAIL: $*" >&2; rm -rf "$T"; exit 1; }
CHROMIUM_FLAGS=(--headless --no-sandbox --disable-gpu --disable-quic --no-first-run
  --disable-background-networking --disable-component-update --disable-sync)
# chromium --dump-dom of FILE into OUT.
dump_dom() {
  timeout 120 "$CHROMIUM" "${CHROMIUM_FLAGS[@]}" --user-data-dir="$(mktemp -d "$T/profile.XXXXXX")" \
    --dump-dom "file://$1" >"$2" 2>"$2.log" || { tail -5 "$2.log" >&2; fail "chromium --dump-dom $1"; }
}
# A copy of page FILE with the probe script before </body>, as OUT.
with_probe() {
  "$PY" - "$1" "$2" <<'PY'
import sys
page = open(sys.argv[1], encoding="utf-8").read()
probe = r"""<script>
(function () {
  const r = {};
  const shown = (e) => !!e && getComputedStyle(e).display !== "none" && e.getBoundingClientRect().height > 0;
  const text = (e) => (e ? e.textContent.trim() : null);
  r.sections = [...document.querySelectorAll("main > section")].map((s) => s.id);
  r.tops = {};
  for (const id of r.sections) r.tops[id] = document.getElementById(id).getBoundingClientRect().top;
  r.loss_text = text(document.getElementById("loss"));
  r.loss_cards = [...document.querySelectorAll("#loss .card")].map((c) => ({
    kind: c.classList[1], label: text(c.querySelector(".l")), n: text(c.querySelector(".n")),
    bytes: text(c.querySelector(".b"))}));
  r.detector_cards = [...document.querySelectorAll("#detector .card")].map((c) => ({
    n: text(c.querySelector(".n")), label: text(c.querySelector(".l"))}));
  const flame = (which) => document.querySelector("#flame div.flame-" + which);
  const root = (which) => text(flame(which) && flame(which).querySelector("svg.flame g.frame title"));
  r.flame_roots = {lost: root("lost"), all: root("all")};
  r.flame_shown_first = {lost: shown(flame("lost")), all: shown(flame("all"))};
  const label = document.querySelector('#flame label[for="flame-all"]');
  if (label) label.click();
  r.flame_shown_after_click = {lost: shown(flame("lost")), all: shown(flame("all"))};
  r.sites = [...document.querySelectorAll("table.sites span.site")].map((s) => s.firstChild.textContent.trim());
  r.ledger_tables = document.querySelectorAll("table.ledgers").length;
  r.ledger_rows = [...document.querySelectorAll("table.ledgers tr")].slice(1).map((tr) =>
    [...tr.querySelectorAll("td")].slice(0, 3).map((td) => td.textContent.trim()));
  r.body_text = document.querySelector("main").innerText;
  r.compare_tables = document.querySelectorAll("table.compare").length;
  r.compare_rows = document.querySelectorAll("table.compare tr").length;
  r.pre = document.querySelectorAll("pre").length;
  r.lines = [...document.querySelectorAll("#timeline polyline.series")].map((l) => {
    const g = l.nextElementSibling;
    return {stroke: l.getAttribute("stroke"), dash: l.getAttribute("stroke-dasharray") || "",
            title: text(l.querySelector("title")),
            markers: g && g.matches("g.markers") ? [...g.children].map((m) => m.classList[1] + " " + m.getAttribute("fill")) : []};
  });
  r.legend = [...document.querySelectorAll("#timeline g.legend-entry")].map((g) => ({
    stroke: g.querySelector("line").getAttribute("stroke"),
    dash: g.querySelector("line").getAttribute("stroke-dasharray") || "",
    marker: g.querySelector(".marker") ? g.querySelector(".marker").classList[1] : null,
    name: text(g.querySelector("text"))}));
  const out = document.createElement("pre");
  out.id = "probe";
  out.textContent = JSON.stringify(r);
  document.body.appendChild(out);
})();
</script>
"""
at = page.rindex("</body>")
open(sys.argv[2], "w", encoding="utf-8").write(page[:at] + probe + page[at:])
PY
}

# --- html_leaks under poolscope run, its page --------------------------------------------------------
"$POOLSCOPE" run --pool=on -o "$T/leaks.json" -- "$PWD/tests/tools/html_leaks" "$T/leaks.log" \
  >"$T/leaks.out" 2>"$T/leaks.err" || fail "poolscope run html_leaks: $(cat "$T/leaks.err")"
"$POOLSCOPE" report --format=html "$T/leaks.json" >"$T/leaks.html" || fail "poolscope report (html_leaks)"
with_probe "$T/leaks.html" "$T/leaks_probe.html"
dump_dom "$T/leaks_probe.html" "$T/leaks_dom.html"
"$PY" - "$T/leaks.json" "$T/leaks.html" "$T/leaks_dom.html" <<'PY' || fail "html_leaks' page"
import html, json, re, sys
report = json.load(open(sys.argv[1]))
page = open(sys.argv[2], encoding="utf-8").read()
dom = open(sys.argv[3], encoding="utf-8").read()
probe = json.loads(html.unescape(re.search(r'<pre id="probe">(.*?)</pre>', dom, re.S).group(1)))
def fail(message):
    sys.exit("FAIL: " + message)
def size(n):  # report/format_util.cc's Bytes()
    return f"{n} B" if abs(n) < 1024 else f"{n / 1024:.1f} KiB" if abs(n) < 1024 ** 2 else f"{n / 1024 ** 2:.1f} MiB"
def count(n):
    return f"{n:,}"
if "<script" in page.lower():
    fail("the page as written holds a script")
# 1. What the program loses first, from `reachability`; then the counting detector's view.
reach = report["reachability"]
kinds = ["definitely_lost", "indirectly_lost", "possibly_lost", "still_reachable"]
if not reach.get("scanned") or any(reach[k]["blocks"] == 0 for k in kinds):
    fail(f"html_leaks should hold blocks of every class: {reach}")
if probe["sections"][0] != "loss" or min(probe["tops"].values()) != probe["tops"]["loss"]:
    fail(f"the page does not lead with what the program loses: {probe['sections']} {probe['tops']}")
if probe["sections"][1] != "detector":
    fail(f"the detector's view does not follow the headline: {probe['sections']}")
want = [{"kind": k, "label": k.replace("_", " "),
         "n": f"{count(reach[k]['blocks'])} block{'' if reach[k]['blocks'] == 1 else 's'}",
         "bytes": size(reach[k]["bytes"])} for k in kinds]
if probe["loss_cards"] != want:
    fail(f"the headline's classes {probe['loss_cards']} are not the report's {want}")
lost = reach["definitely_lost"]["blocks"] + reach["indirectly_lost"]["blocks"]
lost_bytes = reach["definitely_lost"]["bytes"] + reach["indirectly_lost"]["bytes"]
if f"The program loses {lost} blocks ({size(lost_bytes)}) at exit" not in probe["loss_text"]:
    fail(f"the headline's sentence: {probe['loss_text']!r}")
outside = report["reconciliation"]["detector_view"]["program_leak_blocks"]
cards = {c["label"]: c["n"] for c in probe["detector_cards"]}
named = [label for label in cards if label.startswith("unfreed blocks outside pools")]
if len(named) != 1 or cards[named[0]] != count(outside):
    fail(f"no 'unfreed blocks outside pools' card of {outside}: {cards}")
if any("leak" in label.lower() for label in cards):
    fail(f"a detector card calls unfreed blocks leaks: {list(cards)}")
# 2. The flame graph: the lost bytes first, all live bytes after a click on its switch.
lost_all = sum(reach[k]["bytes"] for k in kinds[:3])
live_all = sum(reach[k]["bytes"] for k in kinds)
if probe["flame_shown_first"] != {"lost": True, "all": False}:
    fail(f"the flame graph does not show the lost bytes first: {probe['flame_shown_first']}")
if probe["flame_shown_after_click"] != {"lost": False, "all": True}:
    fail(f"the switch does not show all live bytes: {probe['flame_shown_after_click']}")
if probe["flame_roots"]["lost"] != f"all lost bytes: {size(lost_all)} (100.0% of lost bytes)":
    fail(f"the lost graph's root {probe['flame_roots']['lost']!r}, expected {size(lost_all)}")
if probe["flame_roots"]["all"] != f"all live bytes: {size(live_all)} (100.0% of live bytes)":
    fail(f"the live graph's root {probe['flame_roots']['all']!r}, expected {size(live_all)}")
# 3. Each site named by its first frame outside libc, the loader and libpoolscope.so (else its
#    innermost frame), derived here from the report's stacks.
inside = re.compile(r"^(libc\.so|ld-linux|libpoolscope\.so)")
def site(stack):
    for frame in stack:
        if not inside.match(frame.get("object", "").rsplit("/", 1)[-1]):
            return frame.get("function") or "[" + frame.get("object", "").rsplit("/", 1)[-1] + "]"
    return stack[0].get("function")
want_sites = sorted(site(s["stack"]) for s in report["sites"])
if sorted(probe["sites"]) != want_sites:
    fail(f"the call sites {sorted(probe['sites'])} are not {want_sites}")
for caller in ("lose_copy", "greet", "write_log", "open_log"):
    if caller not in probe["sites"]:
        fail(f"{caller}, which called into glibc, does not name its site: {probe['sites']}")
print("html_leaks: headline, detector view, flame switch and call sites as the report says")
PY
# Without a scan the headline says so (the recorded demo run predates the scan).
"$POOLSCOPE" report --format=html "$PWD/tests/testdata/demo_on.json" >"$T/noscan.html" || fail "poolscope report (demo_on.json)"
grep -q '<p class="unknown">Reachability was not computed for this run' "$T/noscan.html" ||
  fail "a report without a scan does not say that reachability was not computed"

# --- the demo under poolscope compare --html: its report page and the comparison page ------------------
"$POOLSCOPE" compare --report-dir="$T/demo" --html="$T/compare.html" >"$T/compare.out" 2>"$T/compare.err" ||
  fail "poolscope compare --html: $(cat "$T/compare.err")"
"$POOLSCOPE" report --format=html "$T/demo/on/on.json" >"$T/report.html" || fail "poolscope report (demo)"
with_probe "$T/report.html" "$T/report_probe.html"
dump_dom "$T/report_probe.html" "$T/report_dom.html"
"$PY" - "$T/demo/on/on.json" "$T/report.html" "$T/report_dom.html" <<'PY' || fail "the demo's page"
import html, json, re, sys
report = json.load(open(sys.argv[1]))
page = open(sys.argv[2], encoding="utf-8").read()
dom = open(sys.argv[3], encoding="utf-8").read()
probe = json.loads(html.unescape(re.search(r'<pre id="probe">(.*?)</pre>', dom, re.S).group(1)))
def fail(message):
    sys.exit("FAIL: " + message)
if "<script" in page.lower():
    fail("the page as written holds a script")
for section in ("loss", "detector", "ledgers", "sizes", "timeline", "flame", "leaks", "sites", "pool", "errors"):
    if section not in probe["sections"]:
        fail(f"the page has no section {section}: {probe['sections']}")
# 4. Each ledger once: one table, and each of its figures once in the page's text.
if probe["ledger_tables"] != 1:
    fail(f"{probe['ledger_tables']} ledger tables")
rows = {row[0]: row[1:] for row in probe["ledger_rows"]}
for label, field in (("allocations", "allocs"), ("frees", "frees"), ("bytes requested", "bytes_requested")):
    figures = [f"{report['logical'][field]:,}", f"{report['real'][field]:,}"]
    if rows.get(label) != figures:
        fail(f"the ledger row {label}: {rows.get(label)}, expected {figures}")
    for figure in figures:
        seen = len(re.findall(r"(?<![\d,])" + re.escape(figure) + r"(?![\d,])", probe["body_text"]))
        if seen != 1:
            fail(f"{label} {figure} appears {seen} times in the page's text")
if len(probe["sites"]) != 20:
    fail(f"the call-site table has {len(probe['sites'])} rows, expected 20 (the demo has {len(report['sites'])} sites)")
print("demo: every section, each ledger figure once, 20 call sites")
PY
# 5. The comparison page.
with_probe "$T/compare.html" "$T/compare_probe.html"
dump_dom "$T/compare_probe.html" "$T/compare_dom.html"
"$PY" - "$T/demo/off/off.json" "$T/demo/on/on.json" "$T/compare.html" "$T/compare_dom.html" <<'PY' || fail "the comparison page"
import html, json, re, sys
off, on = (json.load(open(p)) for p in sys.argv[1:3])
page = open(sys.argv[3], encoding="utf-8").read()
dom = open(sys.argv[4], encoding="utf-8").read()
probe = json.loads(html.unescape(re.search(r'<pre id="probe">(.*?)</pre>', dom, re.S).group(1)))
def fail(message):
    sys.exit("FAIL: " + message)
if "<script" in page.lower():
    fail("the comparison page as written holds a script")
if probe["compare_tables"] != 1 or probe["pre"] != 0:
    fail(f"the table is not an HTML table ({probe['compare_tables']} tables, {probe['pre']} <pre>)")
if probe["compare_rows"] < 15:
    fail(f"the comparison table has {probe['compare_rows']} rows")
for run, label in ((off, "pooling off"), (on, "pooling on")):
    if f"{run['logical']['allocs']:,}" not in probe["body_text"]:
        fail(f"the table lacks {label}'s logical allocations")
lines = probe["lines"]
if len(lines) != 6:
    fail(f"the chart has {len(lines)} lines, expected the two runs' six")
if len({l["stroke"] for l in lines}) != 6:
    fail(f"the six lines share colours: {[l['stroke'] for l in lines]}")
dash = {run: {l["dash"] for l in lines if l["title"].startswith(run + ":")} for run in ("pooling off", "pooling on")}
if any(len(d) != 1 for d in dash.values()) or dash["pooling off"] == dash["pooling on"]:
    fail(f"the runs' lines are not told apart by their dash patterns: {dash}")
shapes = {}
for l in lines:
    kinds = {m.split()[0] for m in l["markers"]}
    if len(l["markers"]) < 2 or len(kinds) != 1 or any(m.split()[1] != l["stroke"] for m in l["markers"]):
        fail(f"line {l['title']} has no markers of one shape in its colour: {l['markers']}")
    shapes.setdefault(l["title"].split(": ", 1)[1], set()).update(kinds)
if len(shapes) != 3 or any(len(s) != 1 for s in shapes.values()) or len({min(s) for s in shapes.values()}) != 3:
    fail(f"the measures do not have a marker shape each: {shapes}")
legend = {e["name"]: e for e in probe["legend"]}
for l in lines:
    e = legend.get(l["title"])
    if not e or (e["stroke"], e["dash"]) != (l["stroke"], l["dash"]) or e["marker"] != l["markers"][0].split()[0]:
        fail(f"the legend entry of {l['title']} does not show its line: {e}")
print("comparison page: a table, six lines in six colours, two dash patterns, three markers, a legend")
PY

# --- the screenshot of the demo's page -------------------------------------------------------------
timeout 120 "$CHROMIUM" "${CHROMIUM_FLAGS[@]}" --user-data-dir="$(mktemp -d "$T/profile.XXXXXX")" \
  --window-size=1200,1600 --screenshot="$T/shot.png" "file://$T/report.html" >"$T/chromium.log" 2>&1
[ -s "$T/shot.png" ] || { tail -20 "$T/chromium.log" >&2; fail "no screenshot"; }
"$PY" - "$T/shot.png" <<'PY' || fail "the screenshot"
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
if [ -n "${SCREENSHOT_OUT:-}" ]; then cp "$T/shot.png" "$SCREENSHOT_OUT"; fi
rm -rf "$T"
exit 0
