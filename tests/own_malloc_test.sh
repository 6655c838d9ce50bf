#!/bin/bash
# A program that defines its own malloc and free (tests/programs/own_malloc.c): poolscope cannot see
# its allocations, so it must say so once on stderr (one warning naming the program) and change
# nothing else: the same stdout and exit status as bare, still one balanced report; quiet=1 silences
# the warning. (options_stderr_test checks that an ordinary program gets no such line.)
# A non-PIE program that takes malloc's address (tests/programs/takes_malloc_address.c, and python3,
# which is built that way on Debian) exports undefined malloc and free symbols that dlsym finds first;
# its calls still reach poolscope, so it must get no warning and a report that counts them.
# An allocator library preloaded ahead of poolscope (tests/programs/forwarding_malloc.c) takes the
# calls of every program: one warning naming the library.
# Args: LIB CHECKER OWN_MALLOC TAKES_MALLOC_ADDRESS FORWARDING_MALLOC
set -euo pipefail
source "$(dirname "$0")/integration_lib.sh"
integration_init "$1" "$2"
prog=$(abspath "$3")
takes=$(abspath "$4")
forwarding=$(abspath "$5")
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

run_with_options takes bare - /dev/null -- "$takes"
run_with_options takes loud "report=@REPORT@" /dev/null -- "$takes"
cmp -s "$WORK/takes/bare/stdout" "$WORK/takes/loud/stdout" || fail "takes/loud: stdout differs from the bare run"
[ "$(cat "$WORK/takes/loud/status")" = 0 ] || fail "takes/loud: exit status $(cat "$WORK/takes/loud/status")"
reports_ok takes loud 1
if grep -q "comes from" "$WORK/takes/loud/stderr"; then
  cat "$WORK/takes/loud/stderr" >&2
  fail "takes/loud: a warning that malloc comes from the program, whose calls reach poolscope"
fi
counted=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["logical"]["by_api"]["malloc"])' \
  "$WORK"/takes/loud/reports/*.json)
[ "$counted" -ge 100 ] || fail "takes/loud: the report counts $counted mallocs, the program makes 100"

# python3 on Debian is such a program (run with PYTHONMALLOC=malloc, every object is a malloc).
run_with_options python loud "report=@REPORT@" /dev/null PYTHONMALLOC=malloc -- python3 -c 'print(sum(range(10)))'
[ "$(cat "$WORK/python/loud/stdout")" = 45 ] || fail "python/loud: stdout $(cat "$WORK/python/loud/stdout")"
if grep -q "comes from" "$WORK/python/loud/stderr"; then
  cat "$WORK/python/loud/stderr" >&2
  fail "python/loud: a warning that malloc comes from python3, whose calls reach poolscope"
fi
reports_ok python loud 1
# A library ahead of poolscope: the program that takes malloc's address then calls the library's.
run_with_options ahead loud "report=@REPORT@" /dev/null LD_PRELOAD="$forwarding:$LIB" -- "$takes"
cmp -s "$WORK/takes/bare/stdout" "$WORK/ahead/loud/stdout" || fail "ahead/loud: stdout differs from the bare run"
warnings=$(grep -c "^poolscope: warning: malloc() comes from .*libforwarding_malloc.so, not from poolscope" "$WORK/ahead/loud/stderr" || true)
[ "$warnings" = 1 ] || { cat "$WORK/ahead/loud/stderr" >&2; fail "ahead/loud: $warnings warning lines naming the library, expected 1"; }

echo "PASS: a program with its own malloc gets one warning and is otherwise left alone; one that only takes malloc's address gets none; an allocator preloaded ahead is named"
