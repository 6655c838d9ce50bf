#!/bin/bash
# Pooled memory never carries data between blocks: `secrets` (pool=1, tag=small) writes secrets into
# pooled blocks on one thread, frees them there or on another thread, and inspects every fresh block
# of a pooled size on the same thread, on the freeing thread and on other threads: no secret byte and
# no nonzero byte may show. The report must show that pools were actually reused (resets in place and
# pools taken from caches), or the test proves nothing. Runs with pool_size 64 (default) and 1024,
# and with malloc_align=8.
# Args: LIB CHECKER SECRETS

source "$(dirname "$0")/hardening_lib.sh"
integration_init "$1" "$2"
prog=$(abspath "$3")
for cfg in "64:" "1024:pool_size=1024:" "64:malloc_align=8:"; do
  size=${cfg%%:*}
  extra=${cfg#*:}
  name=secrets_$size${extra:+_$(echo "$extra" | tr -c 'a-z0-9' _)}
  run_with_options "$name" pool1 "pool=1:tag=small:quiet=1:${extra}report=@REPORT@" /dev/null -- "$prog" "$size"
  status=$(cat "$WORK/$name/pool1/status")
  sed "s/^/  $name: /" "$WORK/$name/pool1/stdout"
  r=$(ls "$WORK/$name/pool1/reports/"r.*.json 2>/dev/null | head -1)
  [ -n "$r" ] || fail "$name: no report"
  hits=$(json_get "$r" 'r["pool"]["hits"]')
  misses=$(json_get "$r" 'r["pool"]["misses"]')
  reuse=$(json_get "$r" 'r["pool"]["resets_in_place"] + r["pool"]["pools_reused"]')
  note "$name: pool.hits=$hits, misses=$misses, resets_in_place + pools_reused=$reuse"
  # First: were the blocks pooled at all (else the fresh blocks come from the allocator below, whose
  # memory is not zeroed, and the check below says nothing about pools).
  [ "$hits" -gt 10000 ] || fail "$name: only $hits pooled allocations (misses: $misses): with these options poolscope did not pool the program's small requests"
  [ "$reuse" -gt 0 ] || fail "$name: no pool was ever reused: the test did not exercise reuse"
  if [ "$status" != 0 ]; then
    head -c 2000 "$WORK/$name/pool1/stderr" >&2
    fail "$name: a fresh pooled block showed old data (exit $status; counts above)"
  fi
  reports_ok "$name" pool1 1
done
echo PASS
