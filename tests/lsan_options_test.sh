#!/bin/bash
# POOLSCOPE_OPTIONS in a program built with LeakSanitizer (shared liblsan): its runtime starts from the
# executable's preinit_array, before libc has set the environment up, and allocates there, so poolscope
# starts while getenv still finds nothing. The options must hold all the same: the report at the path
# they give, nothing on stderr from poolscope (quiet=1), the program's output as bare. LSan's own
# check is left on: its report and exit status are the same with and without poolscope's options.
# Args: LIB CHECKER LSAN_LEAKS
set -euo pipefail
source "$(dirname "$0")/integration_lib.sh"
integration_init "$1" "$2"
prog=$(abspath "$3")
dir=$WORK/lsan
mkdir -p "$dir"
status=0
LSAN_OPTIONS=detect_leaks=0 "$prog" > "$dir/bare.out" 2> "$dir/bare.err" || status=$?
[ "$status" = 0 ] || fail "bare run exited $status: $(cat "$dir/bare.err")"
status=0
LSAN_OPTIONS=detect_leaks=0 LD_PRELOAD="$LIB" POOLSCOPE_OPTIONS="quiet=1:report=$dir/r.%p.json" "$prog" \
  > "$dir/pre.out" 2> "$dir/pre.err" || status=$?
[ "$status" = 0 ] || fail "preloaded run exited $status: $(cat "$dir/pre.err")"
cmp -s "$dir/bare.out" "$dir/pre.out" || fail "stdout differs: $(cat "$dir/pre.out")"
! grep -q poolscope "$dir/pre.err" || fail "poolscope spoke on stderr with quiet=1: $(cat "$dir/pre.err")"
report=$(ls "$dir"/r.*.json 2> /dev/null | head -1 || true)
[ -n "$report" ] || fail "no report at the path POOLSCOPE_OPTIONS gives (options ignored?)"
"$PY" "$CHECKER" "$report" > "$dir/check" || fail "the report fails its check: $(cat "$dir/check")"
"$PY" - "$report" <<'PY' || exit 1
import json, sys
r = json.load(open(sys.argv[1]))
assert r["options"]["quiet"] == 1, f"FAIL: options in the report: {r['options']}"
assert r["logical"]["allocs"] >= 100, f"FAIL: {r['logical']['allocs']} allocations counted, the program makes 100"
PY
echo "PASS: POOLSCOPE_OPTIONS hold in a program whose sanitizer runtime starts before libc"
