#!/bin/bash
# File: tests/tools/diff_test.sh
#
# `poolscope diff` on reports of real runs (the real preload library in leak_by_args, /bin/true):
# leaks matched by stack across two runs (new, gone, grown, shrunk, with their bytes and blocks,
# the largest change first), peak RSS from the reports, the warning on stderr for reports of
# different executables and none for two runs of one program.
set -u
POOLSCOPE="$PWD/tools/poolscope"
LEAKER="$PWD/tests/tools/leak_by_args"
T="$(mktemp -d "${TEST_TMPDIR:-/tmp}/diff_test.XXXXXX")"
export TMPDIR="$T"
unset POOLSCOPE_LIB POOLSCOPE_OPTIONS
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
[ -x "$POOLSCOPE" ] || { echo "FAIL: $POOLSCOPE missing" >&2; exit 1; }

# A: 5 x 100 B from leak_a, 4 x 10 B from leak_c. B: 3 x 100 B from leak_a, 2 x 1000 B from leak_b.
"$POOLSCOPE" run -o "$T/a.json" -- "$LEAKER" 5 0 4 2>"$T/run_a" || fail "run A: $(cat "$T/run_a")"
"$POOLSCOPE" run -o "$T/b.json" -- "$LEAKER" 3 2 0 2>"$T/run_b" || fail "run B: $(cat "$T/run_b")"
"$POOLSCOPE" run -o "$T/t.json" -- /bin/true 2>"$T/run_t" || fail "run true: $(cat "$T/run_t")"

# The changed rows: change, bytes, A bytes, B bytes, A blocks, B blocks, and the caller of leak().
rows() { sed -n '/^leaks by stack/,$p' "$1" | awk '$1 ~ /^(new|gone|grown|shrunk)$/ {
  print $1, $2, $3, $4, $5, $6, $9 }'; }

"$POOLSCOPE" diff "$T/a.json" "$T/b.json" >"$T/ab" 2>"$T/ab.err" || fail "diff A B: status $?"
grep -q '^  1 new, 1 gone, 0 grown, 1 shrunk, ' "$T/ab" || fail "A->B counts: $(grep -A1 '^leaks by' "$T/ab")"
expected="new +2,000 0 2,000 0 2 leak_b
shrunk -200 500 300 5 3 leak_a
gone -40 40 0 4 0 leak_c"
[ "$(rows "$T/ab")" = "$expected" ] || fail "A->B rows:
$(rows "$T/ab")
expected:
$expected"
[ ! -s "$T/ab.err" ] || fail "diff of two runs of one program wrote to stderr: $(cat "$T/ab.err")"
# Peak RSS from the reports themselves (process.max_rss_kib), as the reports give it.
for side in a b; do
  kib=$(grep -o '"max_rss_kib": *[0-9]*' "$T/$side.json" | grep -o '[0-9]*$')
  [ -n "$kib" ] && [ "$kib" -gt 0 ] || fail "report $side has no process.max_rss_kib"
done
grep -qE '^peak RSS +[0-9.]+ [KM]iB +[0-9.]+ [KM]iB ' "$T/ab" || fail "diff's peak RSS: $(grep '^peak RSS' "$T/ab")"

"$POOLSCOPE" diff "$T/b.json" "$T/a.json" >"$T/ba" 2>"$T/ba.err" || fail "diff B A: status $?"
grep -q '^  1 new, 1 gone, 1 grown, 0 shrunk, ' "$T/ba" || fail "B->A counts: $(grep -A1 '^leaks by' "$T/ba")"
expected="gone -2,000 2,000 0 2 0 leak_b
grown +200 300 500 3 5 leak_a
new +40 0 40 0 4 leak_c"
[ "$(rows "$T/ba")" = "$expected" ] || fail "B->A rows:
$(rows "$T/ba")
expected:
$expected"

"$POOLSCOPE" diff "$T/a.json" "$T/t.json" >"$T/at" 2>"$T/at.err" || fail "diff A true: status $?"
[ "$(wc -l <"$T/at.err")" = 1 ] || fail "expected one stderr line, got: $(cat "$T/at.err")"
grep -q '^poolscope: diff: warning: the reports are of different executables (A: .*/leak_by_args, B: .*/true)' \
  "$T/at.err" || fail "no executable warning: $(cat "$T/at.err")"
grep -q 'different executables' "$T/at" && fail "the warning went to stdout"

[ "$failures" = 0 ] || exit 1
echo PASS
