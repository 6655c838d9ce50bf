#!/bin/bash
# poolscope first in LD_PRELOAD, stacked on jemalloc, tcmalloc (minimal), mimalloc and heaptrack's
# preload library (so RTLD_NEXT finds the peer), with pool=0 and pool=1: alloc_family's stdout and
# stderr byte-identical to the bare run, exit status 0 (no crash at exit), one report per run that
# passes check_report.py (the identities) with no errors. A missing peer library FAILS the test.
# Args: LIB CHECKER ALLOC_FAMILY.  Short form: 300 iterations per thread; long form: 3000.

source "$(dirname "$0")/hardening_lib.sh"
integration_init "$1" "$2"
prog=$(abspath "$3")
iters=$(pick 300 3000)

peers=(
  jemalloc=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2
  tcmalloc=/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4
  mimalloc=/usr/lib/x86_64-linux-gnu/libmimalloc.so.2
  heaptrack=/usr/lib/heaptrack/libheaptrack_preload.so
)
for p in "${peers[@]}"; do
  [ -f "${p#*=}" ] || fail "peer library missing: ${p#*=} (scripts/setup.sh installs it)"
done

# jemalloc defines no pvalloc: glibc's would serve it and jemalloc's free() crash on the block, with
# or without poolscope; alloc_family skips pvalloc for it (and its bare run does the same).
run_with_options family bare - /dev/null -- "$prog" "$iters"
run_with_options family_nopv bare - /dev/null -- "$prog" "$iters" no-pvalloc
for b in family family_nopv; do
  [ "$(cat "$WORK/$b/bare/status")" = 0 ] || fail "the bare run failed: $(cat "$WORK/$b/bare/stderr")"
  grep -q '^problems: alignment 0, contents 0, calloc zero 0, usable size 0$' "$WORK/$b/bare/stdout" ||
    fail "the bare run reports problems: $(cat "$WORK/$b/bare/stdout")"
done

raw=$WORK/heaptrack_raw
mkdir -p "$raw"
for p in "${peers[@]}"; do
  name=${p%%=*}
  path=${p#*=}
  for pool in 0 1; do
    mode=${name}_pool$pool
    vars=("LD_PRELOAD=$LIB:$path")
    fam=family
    extra=()
    [ "$name" = jemalloc ] && { fam=family_nopv; extra=(no-pvalloc); }
    [ "$name" = heaptrack ] && vars+=("DUMP_HEAPTRACK_OUTPUT=$raw/$mode")
    t0=$(now_ms)
    run_with_options "$fam" "$mode" "pool=$pool:quiet=1:report=@REPORT@" /dev/null "${vars[@]}" -- "$prog" "$iters" "${extra[@]}"
    note "$fam/$mode: $(( $(now_ms) - t0 )) ms"
    same_as_bare "$fam" "$mode"
    reports_ok "$fam" "$mode" "$pool"
    single_report "$fam" "$mode" alloc_family
    if [ "$name" = heaptrack ]; then
      [ -s "$raw/$mode" ] || fail "family/$mode: heaptrack wrote no data to $raw/$mode (was it below poolscope?)"
      if [ -x /usr/lib/heaptrack/libexec/heaptrack_interpret ] && command -v heaptrack_print >/dev/null; then
        /usr/lib/heaptrack/libexec/heaptrack_interpret <"$raw/$mode" | gzip >"$raw/$mode.gz" ||
          fail "family/$mode: heaptrack_interpret failed on the trace"
        calls=$(heaptrack_print "$raw/$mode.gz" 2>/dev/null | grep -m1 '^calls to allocation functions:' || true)
        real=$(json_get "$WORK/family/$mode/reports/"r.*.json 'r["real"]["allocs"]')
        note "family/$mode: heaptrack saw: ${calls:-?}; poolscope real.allocs = $real"
        [ -n "$calls" ] || fail "family/$mode: heaptrack_print found no allocation calls in the trace"
      fi
    fi
  done
done
echo PASS
