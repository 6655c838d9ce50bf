#!/bin/bash
# Everyday programs, each run bare and under poolscope in several configurations: the output, the
# exit status and stderr must be the bare run's, and every report (one per process: pipelines,
# sort's helpers, git's and python's children write their own) complete and balanced.
#
# The programs are what every Debian machine has plus what scripts/setup.sh installs (coreutils,
# gzip, tar, xz, find, grep, sed, mawk, diff, bash; python3, perl, sqlite3, git). Between them they
# fork, exec, run threads (sort --parallel, python3's threading), pipe, reallocate heavily and free
# on other threads.
#
# Configurations: the defaults; pool=0; pool_size=256 with malloc_align=8 and track=0; one pool of
# 8 bytes per thread with drain_at_exit=1. All with quiet=1 (stderr must then be byte-identical to
# the bare run's), and the defaults once more with quiet=0, where the only extra stderr lines allowed
# are the reports' "report written" lines, each naming a report that exists.
# Args: LIB CHECKER
set -euo pipefail
source "$(dirname "$0")/integration_lib.sh"
integration_init "$1" "$2"

data=$WORK/data
mkdir -p "$data"
# 50,000 numbers in a scrambled but fixed order, and a small git repository with fixed dates.
"$PY" -c 'import sys; sys.stdout.write("".join("%d\n" % ((i * 7919) % 50000) for i in range(50000)))' >"$data/nums"
export GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@example.invalid GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@example.invalid
export GIT_AUTHOR_DATE="2026-01-01T00:00:00Z" GIT_COMMITTER_DATE="2026-01-01T00:00:00Z"
export HOME=$WORK/home GIT_CONFIG_NOSYSTEM=1
mkdir -p "$HOME"

commands=(
  "sort -n $data/nums | tail -3"
  "sort --parallel=2 -S 1M -r $data/nums | md5sum"
  "awk '{s += \$1} END {print s}' $data/nums"
  "sed -n 's/9/x/gp' $data/nums | uniq | wc -l"
  "gzip -c $data/nums | gunzip -c | md5sum"
  "xz -c $data/nums | xz -dc | md5sum"
  "tar cf - -C $data nums | tar tvf - | wc -l"
  "find /usr/share/perl5 -name '*.pm' | sort | md5sum"
  "grep -r -l -e malloc /usr/include --include='*.h' | sort | md5sum"
  "diff <(seq 1 3000) <(seq 2 3001) | tail -2"
  "bash -c 'x=; for i in \$(seq 1 3000); do x=\"\$x\$i\"; done; echo \${#x}'"
  "sqlite3 :memory: 'create table t(a, b); with recursive c(x) as (select 1 union all select x + 1 from c where x < 20000) insert into t select x, x % 7 from c; select b, count(*), sum(a) from t group by b;'"
  "perl -e 'my %h; \$h{\$_} = \"v\" x (\$_ % 50) for 1..60000; my \$n = 0; \$n += length(\$h{\$_}) for keys %h; print \"\$n\\n\"'"
  "perl -MPOSIX -e 'my \$pid = fork(); if (!\$pid) { my @a = map { \"x\" x \$_ } 1..5000; POSIX::_exit(3) } waitpid(\$pid, 0); print \"child \", \$? >> 8, \"\\n\"'"
  "PYTHONMALLOC=malloc python3 -c 'import json; d = {str(i): [i, str(i) * 3] for i in range(30000)}; print(len(json.loads(json.dumps(d))))'"
  "PYTHONMALLOC=malloc python3 -c 'import threading; r = []; f = lambda: r.append(sum(len(str(i)) for i in range(60000))); ts = [threading.Thread(target=f) for _ in range(4)]; [t.start() for t in ts]; [t.join() for t in ts]; print(sum(r))'"
  "PYTHONMALLOC=malloc python3 -c 'import multiprocessing as mp; p = mp.Pool(2); print(sum(p.map(len, [\"x\" * i for i in range(3000)]))); p.close(); p.join()'"
  "rm -rf repo && git init -q repo && cd repo && seq 1 500 > f && git add f && git commit -qm one && seq 1 2 500 > f && git commit -qam two && git log --format=%s%n%H && git diff HEAD~1 --stat"
)

configs=(
  "defaults:"
  "pool0:pool=0"
  "wide:pool_size=256:malloc_align=8:track=0"
  "tiny:pools=1:pool_size=8:drain_at_exit=1"
)

i=0
for cmd in "${commands[@]}"; do
  i=$((i + 1))
  name=cmd$i
  note "$name: $cmd"
  run_with_options "$name" bare - /dev/null -- /bin/bash -c "$cmd"
  [ "$(cat "$WORK/$name/bare/status")" = 0 ] || fail "$name: the bare run failed ($(cat "$WORK/$name/bare/status")): $(head -c 500 "$WORK/$name/bare/stderr")"
  [ -s "$WORK/$name/bare/stdout" ] || fail "$name: the bare run printed nothing"
  for config in "${configs[@]}"; do
    mode=${config%%:*}
    options=${config#*:}
    pool=1
    [ "$mode" = pool0 ] && pool=0
    run_with_options "$name" "$mode" "${options:+$options:}quiet=1:report=@REPORT@" /dev/null -- /bin/bash -c "$cmd"
    same_as_bare "$name" "$mode"
    reports_ok "$name" "$mode" "$pool"
  done
  # quiet=0: the bare run's stderr and one "report written" line per report, nothing else.
  run_with_options "$name" loud "report=@REPORT@" /dev/null -- /bin/bash -c "$cmd"
  cmp -s "$WORK/$name/bare/stdout" "$WORK/$name/loud/stdout" || fail "$name/loud: stdout differs from the bare run"
  extra=$(diff "$WORK/$name/bare/stderr" "$WORK/$name/loud/stderr" | sed -n 's/^> //p' |
    grep -v "^poolscope: report written to $WORK/$name/loud/reports/r\.[0-9]*\.json$" || true)
  [ -z "$extra" ] || fail "$name/loud: poolscope wrote more than its report lines on stderr: $extra"
  # Each line names a report that exists. (Fewer lines than reports is right: coreutils close their
  # stderr on the way out, before the library's line, which then has nowhere to go.)
  while read -r path; do
    [ -f "$path" ] || fail "$name/loud: a 'report written' line names $path, which does not exist"
  done < <(sed -n 's/^poolscope: report written to //p' "$WORK/$name/loud/stderr")
  reports_ok "$name" loud 1
done
echo "PASS: ${#commands[@]} programs, ${#configs[@]} configurations and quiet=0: same output, status and stderr as bare, every report balanced"
