#!/bin/bash
# The library's small variables share a few pages. Every process under poolscope touches most of them
# at start-up, each page a fault of its own; arrays of a page or more (POOLSCOPE_LARGE_BSS, in
# track/populate.h) lie after them in .lbss, so that they do not spread the small ones over the
# megabytes between them. Fails when .bss holds more than 64 KiB or any array of two pages or more
# (one added without the attribute), or when the large arrays are not in .lbss.
# Args: LIB CHECKER
set -euo pipefail
source "$(dirname "$0")/integration_lib.sh"
integration_init "$1" "$2"

readelf -SW "$LIB" >"$WORK/sections" || fail "readelf cannot read $LIB"
nm -S --defined-only "$LIB" >"$WORK/symbols" || fail "nm cannot read $LIB"
"$PY" - "$WORK/sections" "$WORK/symbols" <<'PYEOF' || fail "see above"
import re, sys
sections = {}
for line in open(sys.argv[1]):
    m = re.search(r'\]\s+(\S+)\s+\S+\s+([0-9a-f]+)\s+[0-9a-f]+\s+([0-9a-f]+)', line)
    if m:
        sections[m.group(1)] = (int(m.group(2), 16), int(m.group(3), 16))
if '.bss' not in sections or '.lbss' not in sections:
    sys.exit(f"FAIL: .bss and .lbss expected, sections: {sorted(sections)}")
start, size = sections['.bss']
if size > 65536:
    sys.exit(f"FAIL: .bss is {size} bytes (at most 65536)")
if sections['.lbss'][1] < 2 << 20:
    sys.exit(f"FAIL: .lbss is {sections['.lbss'][1]} bytes: the large arrays are not in it")
big = []
for line in open(sys.argv[2]):
    f = line.split()
    if len(f) == 4 and f[2] in 'bB':
        at, n = int(f[0], 16), int(f[1], 16)
        if start <= at < start + size and n >= 8192:
            big.append(f"{f[3]} ({n} bytes)")
if big:
    sys.exit("FAIL: arrays of two pages or more in .bss: " + ", ".join(big))
print(f"--- .bss {size} bytes, .lbss {sections['.lbss'][1]} bytes")
PYEOF
echo PASS
