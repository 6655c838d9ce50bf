#!/bin/bash
# A program that defines its own malloc and free (tests/programs/own_malloc.c): poolscope cannot see
# its allocations, so it must say so once on stderr (one warning naming the program) and change
# nothing else: the same stdout and exit status as bare, still one balanced report; quiet=1 silences
# the warning. (options_stderr_test checks that an ordinary program gets no such line.)
# Args: LIB CHECKER OWN_MALLOC
set -euo pipefail
source "$(dirname "$0")/integration_lib.sh"
integration_init "$1" "$2"
prog=$(abspath "$3")
run_with_options own bare - /dev/null -- "$prog"
run_with_options own loud "report=@REPORT@" /dev/null -- "$prog"
run_with_options own quiet "quiet=1:report=@REPORT@" /dev/null -- "$prog"
for mode in loud quiet; do
  cmp -s "$WORK/own/bare/stdout" "$WORK/own/$mode/stdout" || fail "own/$mode: stdout differs from the bare run"
  [ "$(cat "$WORK/own/$mode/status")" = "$(cat "$WORK/own/bare/status")" ] || fail "own/$mode: exit status differs"
  reports_ok own "$mode" 1
done
grep -q "own allocator: ok" "$WORK/own/bare/stdout" || fail "the bare run did not use its own allocator"
warnings=$(grep -c "^poolscope: warning: malloc() comes from .*own_malloc, not from poolscope" "$WORK/own/loud/stderr" || true)
[ "$warnings" = 1 ] || { cat "$WORK/own/loud/stderr" >&2; fail "own/loud: $warnings warning lines, expected 1"; }
lines=$(wc -l <"$WORK/own/loud/stderr")
[ "$lines" = 2 ] || { cat "$WORK/own/loud/stderr" >&2; fail "own/loud: $lines stderr lines, expected the warning and the report line"; }
[ ! -s "$WORK/own/quiet/stderr" ] || { cat "$WORK/own/quiet/stderr" >&2; fail "own/quiet: stderr is not empty"; }
echo "PASS: a program with its own malloc gets one warning and is otherwise left alone"
