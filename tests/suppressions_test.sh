#!/bin/bash
# The files `poolscope suppressions` prints, used with the real tools and the real library, suppress
# exactly poolscope's pools and nothing of the program's:
# - memcheck below poolscope (--soname-synonyms=somalloc=nouserintercepts --show-leak-kinds=all),
#   with pools described to it (valgrind=1) and not (valgrind=0), on leak_shapes' list and
#   interleaved modes: the suppressed blocks are the pools live at exit by the same run's report
#   (pools cached + in use), no loss record left has a pool's allocation stack, and the program's
#   own leaks are still reported as leak_shapes.c documents them (list: the 200-byte block kept in a
#   global, still reachable; interleaved with valgrind=1: its 10 leaks, 1348 bytes, definitely lost;
#   with valgrind=0 only its 3 blocks too large for a pool are memcheck's to see: 1068 bytes);
# - heaptrack below poolscope (its library after ours in LD_PRELOAD), heaptrack_print with the file:
#   the pools' leak disappears, the program's 200-byte block stays;
# - LeakSanitizer below poolscope (leak_shapes built with its runtime), on interleaved: with the file,
#   the objects it suppresses are those of the records with a pool's stack in the run without it,
#   and what is left is the program's 3 blocks too large for a pool (1068 bytes).
# Args: LIB LEAK_SHAPES POOLSCOPE MEMCHECK_SUMMARY LEAK_SHAPES_LSAN
set -euo pipefail
lib=$(readlink -f "$1"); prog=$(readlink -f "$2"); poolscope=$(readlink -f "$3"); summary=$(readlink -f "$4")
lsan_prog=$(readlink -f "$5")
work=${TEST_TMPDIR:-$(mktemp -d)}/suppressions
mkdir -p "$work"
for tool in valgrind heaptrack_print; do
  command -v "$tool" >/dev/null || { echo "FAIL: $tool is not installed"; exit 1; }
done
preload=/usr/lib/heaptrack/libheaptrack_preload.so
interpret=/usr/lib/heaptrack/libexec/heaptrack_interpret
for f in "$preload" "$interpret"; do [ -e "$f" ] || { echo "FAIL: $f is missing"; exit 1; }; done
fail=0
# Any report serves: the entries do not depend on its figures, only the comments do.
LD_PRELOAD="$lib" POOLSCOPE_OPTIONS="quiet=1:report=$work/any.json" "$prog" none > /dev/null
"$poolscope" suppressions --format=valgrind "$work/any.json" > "$work/vg.supp"
"$poolscope" suppressions --format=heaptrack "$work/any.json" > "$work/ht.supp"
"$poolscope" suppressions --format=lsan "$work/any.json" > "$work/lsan.supp"

# figure SUMMARY_JSON KIND FIELD
figure() { /usr/bin/python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]][sys.argv[3]])' "$@"; }
live_pools() {
  /usr/bin/python3 -c 'import json, sys; p = json.load(open(sys.argv[1]))["pool"]; print(p["pools_cached_at_exit"] + p["pools_in_use_at_exit"])' "$1"
}
# expect LABEL WHAT GOT WANT
expect() {
  if [ "$3" != "$4" ]; then echo "FAIL: $1: $2 is $3, expected $4"; fail=1; fi
}
# pool_records LOG: loss records whose allocation stack holds a pool's allocation
pool_records() {
  /usr/bin/python3 - "$1" <<'PY'
import re, sys
records = re.split(r"\n==\d+== \n", open(sys.argv[1], errors="replace").read())
print(sum(1 for r in records if "in loss record" in r and "ShimBackend::AllocPool" in r))
PY
}

memcheck() {  # memcheck MODE VALGRIND [EXPECTED_DEFINITE_BLOCKS EXPECTED_DEFINITE_BYTES]
  local mode=$1 v=$2 label="memcheck $1 valgrind=$2" base="$work/$1.$2" failed_before=$fail
  fail=0
  local opts="pool=1:pool_size=64:valgrind=$v:quiet=1"
  local vg=(valgrind --soname-synonyms=somalloc=nouserintercepts --leak-check=full
            --show-leak-kinds=all --num-callers=30 --run-libc-freeres=no --run-cxx-freeres=no)
  LD_PRELOAD="$lib" POOLSCOPE_OPTIONS="$opts:report=$base.bare.json" "${vg[@]}" \
    --log-file="$base.bare.log" "$prog" "$mode" > /dev/null
  LD_PRELOAD="$lib" POOLSCOPE_OPTIONS="$opts:report=$base.supp.json" "${vg[@]}" \
    --suppressions="$work/vg.supp" --log-file="$base.supp.log" "$prog" "$mode" > /dev/null
  /usr/bin/python3 "$summary" --log "$base.bare.log" > "$base.bare.sum"
  /usr/bin/python3 "$summary" --log "$base.supp.log" > "$base.supp.sum"
  local pools; pools=$(live_pools "$base.supp.json")
  [ "$pools" -gt 0 ] || { echo "FAIL: $label: no pool live at exit, nothing to check"; fail=1; }
  # Without the file, the pools are among memcheck's loss records.
  [ "$(pool_records "$base.bare.log")" -gt 0 ] || { echo "FAIL: $label: no pool loss record without suppressions"; fail=1; }
  expect "$label" "blocks suppressed without the file" "$(figure "$base.bare.sum" suppressed blocks)" 0
  # With it: exactly the pools suppressed, and none left in the loss records.
  expect "$label" "blocks suppressed" "$(figure "$base.supp.sum" suppressed blocks)" "$pools"
  expect "$label" "pool loss records left" "$(pool_records "$base.supp.log")" 0
  # The program's own leaks are still reported.
  if [ $# -ge 4 ]; then
    expect "$label" "definitely lost blocks" "$(figure "$base.supp.sum" definitely_lost blocks)" "$3"
    expect "$label" "definitely lost bytes" "$(figure "$base.supp.sum" definitely_lost bytes)" "$4"
  fi
  if [ "$mode" = list ] && ! grep -q "200 bytes in 1 blocks are still reachable" "$base.supp.log"; then
    echo "FAIL: $label: the program's 200-byte block kept in a global is not reported"; fail=1
  fi
  [ "$fail" -eq 0 ] && echo "ok: $label: $pools pools suppressed, the program's leaks reported"
  [ "$failed_before" -eq 0 ] || fail=1
  return 0
}
memcheck list 1
memcheck list 0
memcheck interleaved 1 10 1348
memcheck interleaved 0 3 1068

# heaptrack below poolscope, on list: the pools are leaked real blocks to it, and so is the
# program's 200-byte block (its list sits in pools, which heaptrack sees as poolscope's calls).
# leaks SECTION_FILE: heaptrack_print's MEMORY LEAKS section. Read whole into a variable before a
# `grep -q` looks at it: under pipefail, a grep that stops at its first match while sed still writes
# makes the pipeline fail (SIGPIPE), and the match reads as none.
leaks() { sed -n '/^MEMORY LEAKS$/,/^MOST TEMPORARY ALLOCATIONS$/p' "$1"; }
LD_PRELOAD="$lib:$preload" DUMP_HEAPTRACK_OUTPUT="$work/ht.raw" \
  POOLSCOPE_OPTIONS="pool=1:pool_size=64:quiet=1:report=$work/ht.json" "$prog" list > /dev/null
"$interpret" < "$work/ht.raw" 2> /dev/null | gzip > "$work/ht.gz"
ht=(heaptrack_print --print-leaks=1 --disable-builtin-suppressions)
"${ht[@]}" "$work/ht.gz" > "$work/ht.bare.txt" 2>&1
"${ht[@]}" --suppressions="$work/ht.supp" "$work/ht.gz" > "$work/ht.supp.txt" 2>&1
[ "$(live_pools "$work/ht.json")" -gt 0 ] || { echo "FAIL: heaptrack: no pool live at exit"; fail=1; }
bare_leaks=$(leaks "$work/ht.bare.txt"); supp_leaks=$(leaks "$work/ht.supp.txt")
if ! grep -q "ShimBackend::AllocPool" <<<"$bare_leaks"; then
  echo "FAIL: heaptrack: without the file, no leak has a pool's allocation stack"; fail=1
fi
if grep -q "invalid suppression" "$work/ht.supp.txt"; then
  echo "FAIL: heaptrack: $(grep 'invalid suppression' "$work/ht.supp.txt")"; fail=1
fi
if grep -q "ShimBackend::AllocPool" <<<"$supp_leaks"; then
  echo "FAIL: heaptrack: with the file, a pool's leak is still listed"; fail=1
fi
after_200=$(grep -A1 "^200B leaked over 1 calls from" <<<"$supp_leaks" || true)
if ! grep -q "make_list" <<<"$after_200"; then
  echo "FAIL: heaptrack: with the file, the program's 200-byte leak from make_list is gone"; fail=1
fi
grep -q "^suppressed leaks: " "$work/ht.supp.txt" || { echo "FAIL: heaptrack: nothing suppressed"; fail=1; }
[ "$fail" -eq 0 ] && echo "ok: heaptrack: the pools suppressed, the program's leak reported"

# LeakSanitizer below poolscope, on interleaved. Its default unwinder follows frame pointers, so of a
# pool's stack it shows the function that called the allocator.
lsan_run() {  # lsan_run SUPPRESSIONS LOG
  LSAN_OPTIONS="exitcode=0:suppressions=$1" LD_PRELOAD="$lib" \
    POOLSCOPE_OPTIONS="pool=1:pool_size=64:quiet=1:report=none" "$lsan_prog" interleaved > /dev/null 2> "$2"
}
lsan_run /dev/null "$work/lsan.bare.log"
lsan_run "$work/lsan.supp" "$work/lsan.supp.log"
/usr/bin/python3 - "$work/lsan.bare.log" "$work/lsan.supp.log" <<'PY' || fail=1
import re, sys
POOL = re.compile(r"in poolscope::PoolFromMalloc|in poolscope_pool_alloc|ShimBackend::AllocPool|Domain::CreatePool")
def records(log):
    """(objects, bytes, is_pool) of each leak record."""
    out = []
    for m in re.finditer(r"(?:Direct|Indirect) leak of (\d+) byte\(s\) in (\d+) object\(s\) allocated from:\n((?:    #.*\n)+)", log):
        out.append((int(m.group(2)), int(m.group(1)), POOL.search(m.group(3)) is not None))
    return out
bare, supp = open(sys.argv[1]).read(), open(sys.argv[2]).read()
pool_objects = sum(o for o, _, pool in records(bare) if pool)
ok = True
if pool_objects == 0:
    print("FAIL: lsan: without the file, no leak record has a pool's stack"); ok = False
used = re.search(r"Suppressions used:\n.*template\n((?:\s+\d+\s+\d+ .*\n)+)", supp)
suppressed = sum(int(line.split()[0]) for line in used.group(1).splitlines()) if used else 0
if suppressed != pool_objects:
    print(f"FAIL: lsan: {suppressed} objects suppressed, the pool records hold {pool_objects}"); ok = False
left = records(supp)
if any(pool for _, _, pool in left):
    print("FAIL: lsan: with the file, a leak record with a pool's stack is left"); ok = False
if (sum(o for o, _, _ in left), sum(b for _, b, _ in left)) != (3, 1068):
    print(f"FAIL: lsan: with the file, {left} left, expected the program's 3 blocks of 1068 bytes"); ok = False
if ok:
    print(f"ok: lsan: {pool_objects} pool objects suppressed, the program's leaks reported")
sys.exit(0 if ok else 1)
PY

if [ "$fail" -ne 0 ]; then
  [ -n "${TEST_UNDECLARED_OUTPUTS_DIR:-}" ] && cp "$work"/*.log "$work"/*.txt "$work"/*.supp "$TEST_UNDECLARED_OUTPUTS_DIR"/ || true
  exit 1
fi
echo PASS
