#!/bin/bash
# memcheck below poolscope reports the errors the program has, no more and no fewer: on correct programs
# (a small-block churn, leak shapes, sqlite3, python3), and on one with an uninitialised read, a
# one-byte overflow, a write after free and a write into a malloc(0) block (heap_errors), memcheck's
# errors and error
# contexts under poolscope equal the bare run's, with pools
# described to memcheck (valgrind=1, the default), not described (valgrind=0), with tracking off, with
# large pools, and with pooling off. Leak records are left out of the count (--leak-check=no): what
# memcheck's leak check sees below poolscope is the subject of valgrind_leaks_test and of the report's
# detector view.
# Args: LIB FREE_CHURN LEAK_SHAPES HEAP_ERRORS
set -euo pipefail
lib=$(readlink -f "$1"); churn=$(readlink -f "$2"); shapes=$(readlink -f "$3"); heap_errors=$(readlink -f "$4")
work=${TEST_TMPDIR:-$(mktemp -d)}/valgrind_errors
mkdir -p "$work"
command -v valgrind >/dev/null || { echo "FAIL: valgrind is not installed"; exit 1; }
vg=(valgrind --soname-synonyms=somalloc=nouserintercepts --leak-check=no --run-libc-freeres=no
    --run-cxx-freeres=no)
errors() {  # errors LOG: memcheck's error count and contexts, "N/M"
  local n
  n=$(sed -n 's/.*ERROR SUMMARY: \([0-9][0-9]*\) errors from \([0-9][0-9]*\) contexts.*/\1\/\2/p' "$1" | tail -n 1)
  [ -n "$n" ] || { echo "FAIL: no ERROR SUMMARY in $1" >&2; tail -20 "$1" >&2; exit 1; }
  echo "$n"
}
sql="create table t(a, b); insert into t values (1, 'one'), (2, 'two'); select sum(a), group_concat(b) from t;"
py="import json, collections; d = collections.Counter('abracadabra'); print(json.dumps(sorted(d.items())))"
run() {  # run NAME OPTIONS(or "bare") CMD...: prints the error count; stdout must match the bare run's
  local name=$1 options=$2; shift 2
  local log="$work/$name.$options.log" out="$work/$name.$options.out"
  if [ "$options" = bare ]; then
    printf '%s\n' "$sql" | PYTHONMALLOC=malloc "${vg[@]}" "$@" > "$out" 2> "$log" || true
  else
    printf '%s\n' "$sql" | PYTHONMALLOC=malloc LD_PRELOAD="$lib" \
      POOLSCOPE_OPTIONS="$options:quiet=1:report=$work/r.%p.json" "${vg[@]}" "$@" > "$out" 2> "$log" || true
  fi
  errors "$log"
}
failed=0
check() {  # check NAME CMD...
  local name=$1; shift
  local bare; bare=$(run "$name" bare "$@")
  for options in ${configs:-pool=1 pool=1:valgrind=0 pool=1:track=0 pool=1:track=0:pool_size=256 pool=0}; do
    local got; got=$(run "$name" "$options" "$@")
    if ! cmp -s "$work/$name.bare.out" "$work/$name.$options.out"; then
      echo "FAIL: $name ($options): output differs from the bare run's"; failed=1
    elif [ "$got" != "$bare" ]; then
      echo "FAIL: $name ($options): memcheck reports $got errors/contexts, $bare bare"
      grep -m1 -A12 -E '^==[0-9]+== (Invalid|Conditional|Use of|Syscall|Mismatched|Source and)' \
        "$work/$name.$options.log" || true
      failed=1
    else
      echo "ok: $name ($options): $got errors/contexts, as bare"
    fi
  done
}
check churn "$churn"
for mode in list interleaved thread_ended thread_blocked; do check "shapes_$mode" "$shapes" "$mode"; done
# (valgrind=0 describes no pool: memcheck then cannot see inside pooled blocks, by design.)
configs="pool=1 pool=1:track=0 pool=1:track=0:pool_size=256 pool=0" check heap_errors "$heap_errors"
[ "$(run heap_errors bare "$heap_errors")" = 4/4 ] || { echo "FAIL: heap_errors: bare memcheck does not see its 4 errors"; failed=1; }
check sqlite3 /usr/bin/sqlite3 :memory:
check python3 /usr/bin/python3 -c "$py"
# poolscope was really loaded: it wrote its reports.
ls "$work"/r.*.json > /dev/null
[ "$failed" -eq 0 ] || exit 1
echo PASS
