#!/bin/bash
# What poolscope costs the short processes builds are made of: GCC's cc1 -O2 on a small preprocessed C
# file (one process, a few thousand allocations), and `make -j2` of a 21-file C program (gcc, cc1,
# as, collect2 and ld per file: about 70 processes). Every configuration runs once a round, in turn
# (bench/interleave.py: medians, wall time; cc1 pinned to one CPU, make free to use both); then the
# page faults of cc1 (perf stat, medians of the same number of runs).
#
#   bench/short_process.sh                     builds with -c opt, then runs (a few minutes)
#   SKIP_BUILD=1 LIB=/path/libpoolscope.so bench/short_process.sh
#   LIB2=/path/other/libpoolscope.so           a second library, measured in the same rounds
#   ROUNDS=9                                   rounds (default 9)
#   CACHES=1                                   each library with a poolscope cache of its own (a copy
#                                              of the user's, then one build), for libraries that
#                                              write the cache differently
#   LADDER=1                                   cc1 also under the configurations between bare and
#                                              `report=none`: counting alone (pool=0 track=0), pooling
#                                              alone (track=0), tracking without stacks (stack_depth=0)
# Needs gcc and make; heaptrack's preload library and perf when they are installed.
set -euo pipefail

cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-9}
if [[ -z "${SKIP_BUILD:-}" ]]; then
  bazel build -c opt //interpose:libpoolscope.so >&2
fi
LIB=$(realpath "${LIB:-bazel-bin/interpose/libpoolscope.so}")
LIB2=${LIB2:+$(realpath "$LIB2")}
HEAPTRACK=/usr/lib/heaptrack/libheaptrack_preload.so
WORK=$(mktemp -d "${TMPDIR:-/tmp}/short_process.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
CC1=$(gcc -print-prog-name=cc1)

# The compiler's input: a small program over the C library's headers (about 2,000 lines once
# preprocessed).
cat >"$WORK/small.c" <<'SRC'
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
struct item { int id; char name[32]; struct item* next; };
static struct item* push(struct item* head, int id) {
  struct item* it = malloc(sizeof *it);
  it->id = id;
  snprintf(it->name, sizeof it->name, "item %d", id);
  it->next = head;
  return it;
}
int main(int argc, char** argv) {
  struct item* head = NULL;
  for (int i = 0; i < argc * 100; ++i) head = push(head, i);
  int n = 0;
  for (struct item* p = head; p; p = p->next) n += strlen(p->name);
  printf("%d %s\n", n, argv[0]);
  return 0;
}
SRC
gcc -E "$WORK/small.c" -o "$WORK/small.i"

# The build: 20 files of a list each and a main.
mkdir "$WORK/proj"
for i in $(seq 1 20); do
  cat >"$WORK/proj/f$i.c" <<SRC
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
struct rec$i { int id; char name[40]; struct rec$i* next; };
static struct rec$i* make$i(int n) {
  struct rec$i* h = 0;
  for (int k = 0; k < n; ++k) {
    struct rec$i* r = malloc(sizeof *r);
    r->id = k;
    snprintf(r->name, sizeof r->name, "r%d", k);
    r->next = h;
    h = r;
  }
  return h;
}
int f$i(int n) {
  int s = 0;
  for (struct rec$i* p = make$i(n); p; p = p->next) s += (int)strlen(p->name) + p->id;
  return s;
}
SRC
done
{
  echo '#include <stdio.h>'
  for i in $(seq 1 20); do echo "int f$i(int);"; done
  echo 'int main(void) {'
  echo '  int s = 0;'
  for i in $(seq 1 20); do echo "  s += f$i(10);"; done
  echo '  printf("%d\n", s);'
  echo '  return 0;'
  echo '}'
} >"$WORK/proj/main.c"
printf 'OBJS := %s main.o\nprog: $(OBJS)\n\t$(CC) -o $@ $(OBJS)\n%%.o: %%.c\n\t$(CC) -O2 -c $< -o $@\n' \
  "$(cd "$WORK/proj" && ls f*.c | sed 's/\.c$/.o/' | tr '\n' ' ')" >"$WORK/proj/Makefile"

mkdir "$WORK/reports"
# cache_of N: the environment that gives library N its own cache with CACHES=1 (nothing otherwise).
cache_of() {
  [[ -n "${CACHES:-}" ]] || return 0
  local dir=$WORK/cache$1 user=${XDG_CACHE_HOME:-$HOME/.cache}/poolscope
  if [[ ! -d "$dir" ]]; then
    mkdir -p "$dir/poolscope"
    [[ -d "$user" ]] && cp -a "$user/." "$dir/poolscope/"
    local lib=$LIB
    [[ "$1" = 2 ]] && lib=$LIB2
    XDG_CACHE_HOME=$dir LD_PRELOAD=$lib POOLSCOPE_OPTIONS=quiet=1:report=none make -s -B -j2 -C "$WORK/proj" >/dev/null
    XDG_CACHE_HOME=$dir LD_PRELOAD=$lib POOLSCOPE_OPTIONS=quiet=1:report=none "$CC1" -quiet -O2 "$WORK/small.i" -o /dev/null
  fi
  echo "XDG_CACHE_HOME=$dir"
}
configs=(--config "none LD_PRELOAD=$LIB POOLSCOPE_OPTIONS=quiet=1:report=none $(cache_of 1)"
         --config "defaults LD_PRELOAD=$LIB POOLSCOPE_OPTIONS=quiet=1:report=$WORK/reports/r.%p.json $(cache_of 1)")
if [[ -n "$LIB2" ]]; then
  configs+=(--config "none2 LD_PRELOAD=$LIB2 POOLSCOPE_OPTIONS=quiet=1:report=none $(cache_of 2)"
            --config "defaults2 LD_PRELOAD=$LIB2 POOLSCOPE_OPTIONS=quiet=1:report=$WORK/reports/r.%p.json $(cache_of 2)")
fi
reference=()
if [[ -f "$HEAPTRACK" ]]; then
  configs+=(--config "heaptrack LD_PRELOAD=$HEAPTRACK DUMP_HEAPTRACK_OUTPUT=$WORK/reports/ht.raw")
  reference=(--reference heaptrack)
fi

ladder=()
if [[ -n "${LADDER:-}" ]]; then
  ladder=(--config "count LD_PRELOAD=$LIB POOLSCOPE_OPTIONS=quiet=1:pool=0:track=0:report=none"
          --config "pool LD_PRELOAD=$LIB POOLSCOPE_OPTIONS=quiet=1:track=0:report=none"
          --config "nostacks LD_PRELOAD=$LIB POOLSCOPE_OPTIONS=quiet=1:stack_depth=0:report=none")
fi

echo "== cc1 -O2 on a small file ($(wc -l <"$WORK/small.i") lines preprocessed), $ROUNDS rounds"
bench/interleave.py --rounds "$ROUNDS" "${reference[@]}" "${ladder[@]}" "${configs[@]}" -- "$CC1" -quiet -O2 "$WORK/small.i" -o /dev/null
echo "== make -j2 of 21 files, $ROUNDS rounds"
bench/interleave.py --rounds "$ROUNDS" --cpu all "${configs[@]}" -- make -s -B -j2 -C "$WORK/proj"

# One more build with the defaults, its reports kept: each program's processes and what their exits
# spent on the scan and on the report (the reports' own figures).
rm -rf "$WORK/exits" && mkdir "$WORK/exits"
LD_PRELOAD="$LIB" POOLSCOPE_OPTIONS="quiet=1:report=$WORK/exits/r.%p.json" make -s -B -j2 -C "$WORK/proj" >/dev/null
echo "== the exits of one make -j2 with the defaults, by program"
python3 - "$WORK/exits" <<'PY'
import collections, glob, json, os, sys
by = collections.defaultdict(lambda: [0, 0, 0, 0])
for path in glob.glob(os.path.join(sys.argv[1], "*.json")):
    with open(path) as f:
        r = json.load(f)
    row = by[os.path.basename(r["process"]["exe"])]
    row[0] += 1
    row[1] += r["reachability"].get("scan_ms") or 0
    row[2] += r["process"].get("report_ms") or 0
    row[3] += r["logical"].get("live_blocks") or 0
print("%-28s %9s %12s %14s %16s" % ("program", "processes", "scan_ms sum", "report_ms sum", "live blocks sum"))
for exe, (n, scan, report, live) in sorted(by.items(), key=lambda kv: -(kv[1][1] + kv[1][2])):
    print("%-28s %9d %12d %14d %16d" % (exe, n, scan, report, live))
PY

if command -v perf >/dev/null; then
  echo "== cc1's page faults (perf stat), medians of $ROUNDS"
  faults() {
    local runs=()
    for _ in $(seq 1 "$ROUNDS"); do
      runs+=("$(env "$@" perf stat -x, -e page-faults "$CC1" -quiet -O2 "$WORK/small.i" -o /dev/null 2>&1 >/dev/null |
        awk -F, '/page-faults/ {print $1}')")
      rm -f "$WORK"/reports/*
    done
    printf '%s\n' "${runs[@]}" | sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'
  }
  echo "bare      $(faults TMPDIR="$WORK")"
  echo "none      $(faults LD_PRELOAD="$LIB" POOLSCOPE_OPTIONS=quiet=1:report=none)"
  echo "defaults  $(faults LD_PRELOAD="$LIB" POOLSCOPE_OPTIONS="quiet=1:report=$WORK/reports/r.%p.json")"
  if [[ -n "$LIB2" ]]; then
    echo "none2     $(faults LD_PRELOAD="$LIB2" POOLSCOPE_OPTIONS=quiet=1:report=none)"
    echo "defaults2 $(faults LD_PRELOAD="$LIB2" POOLSCOPE_OPTIONS="quiet=1:report=$WORK/reports/r.%p.json")"
  fi
fi
