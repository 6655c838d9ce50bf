#!/bin/bash
# tag=caller:GLOB pools only requests made from code in a matching object, including one that is
# dlopen'ed and dlclose'd over and over: dlopen_loop with the plugin's object as the glob pools the
# plugin's small requests (pool hits) and leaves the rest untagged; a glob that matches nothing pools
# nothing. Output and exit status stay those of the bare run; reports balance.
# Args: LIB CHECKER DLOPEN_LOOP LIBPLUGIN
set -euo pipefail
lib=$(readlink -f "$1"); checker=$(readlink -f "$2"); prog=$(readlink -f "$3"); plugin=$(readlink -f "$4")
work=${TEST_TMPDIR:-$(mktemp -d)}/caller_tag
mkdir -p "$work"
"$prog" "$plugin" 40 > "$work/bare.out"
for glob in '*libplugin.so' '*matches-nothing*'; do
  rm -f "$work"/r.*.json
  LD_PRELOAD="$lib" POOLSCOPE_OPTIONS="tag=caller:$glob:quiet=1:report=$work/r.%p.json" \
    "$prog" "$plugin" 40 > "$work/tagged.out"
  cmp "$work/bare.out" "$work/tagged.out" || { echo "FAIL: output differs with tag=caller:$glob"; exit 1; }
  report=$(ls "$work"/r.*.json)
  /usr/bin/python3 "$checker" "$report"
  /usr/bin/python3 - "$report" "$glob" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); glob = sys.argv[2]
p = r["pool"]
assert r["options"]["tag"] == "caller:" + glob, r["options"]["tag"]
small = p["hits"] + p["misses"]["untagged"]
if glob == "*libplugin.so":
    # The plugin makes small requests every round (40 rounds); the program itself makes few.
    assert p["hits"] >= 40, "expected the plugin's requests pooled, hits=%d" % p["hits"]
    assert p["misses"]["untagged"] < p["hits"], p
else:
    assert p["hits"] == 0, "a glob that matches nothing pooled %d requests" % p["hits"]
    assert p["misses"]["untagged"] > 0, p
print("ok", glob, "hits", p["hits"], "untagged", p["misses"]["untagged"])
PY
done
echo PASS
