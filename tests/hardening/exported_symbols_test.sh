#!/bin/bash
# The preload library exports nothing but the interposed functions and the poolscope_* API: every
# GLOBAL or WEAK defined symbol of its dynamic symbol table (readelf --dyn-syms) must be one of the
# allowed names (LOCAL entries, e.g. TLS, are fine). Also: every interposed function IS exported.
# Args: LIB
set -u
LIB=$(readlink -f "$1")
fail() { echo "FAIL: $*" >&2; exit 1; }
command -v readelf >/dev/null || fail "readelf is required (binutils)"
allowed_list="malloc free calloc realloc reallocarray posix_memalign aligned_alloc memalign valloc pvalloc
malloc_usable_size exit _exit _Exit dlclose
sigaction __sigaction signal bsd_signal ssignal sysv_signal __sysv_signal sigset sigignore siginterrupt
_Znwm _Znam _ZnwmRKSt9nothrow_t _ZnamRKSt9nothrow_t _ZnwmSt11align_val_t _ZnamSt11align_val_t
_ZnwmSt11align_val_tRKSt9nothrow_t _ZnamSt11align_val_tRKSt9nothrow_t
_ZdlPv _ZdaPv _ZdlPvm _ZdaPvm _ZdlPvRKSt9nothrow_t _ZdaPvRKSt9nothrow_t _ZdlPvSt11align_val_t
_ZdaPvSt11align_val_t _ZdlPvmSt11align_val_t _ZdaPvmSt11align_val_t _ZdlPvSt11align_val_tRKSt9nothrow_t
_ZdaPvSt11align_val_tRKSt9nothrow_t"
required="malloc free calloc realloc reallocarray posix_memalign aligned_alloc memalign valloc pvalloc
malloc_usable_size dlclose _Znwm _Znam _ZdlPv _ZdaPv _ZnwmRKSt9nothrow_t _ZnwmSt11align_val_t _ZdlPvm
_ZdlPvSt11align_val_t poolscope_arena_open poolscope_arena_alloc poolscope_arena_close poolscope_tag_push
poolscope_tag_pop sigaction signal poolscope_arena_alloc_call poolscope_impl_arena_layout poolscope_impl_arena_alloc_at poolscope_impl_arena_open_at"
declare -A allowed
for s in $allowed_list; do allowed[$s]=1; done
table=$(readelf --dyn-syms -W "$LIB") || fail "readelf failed on $LIB"
# Columns: Num: Value Size Type Bind Vis Ndx Name
exported=$(echo "$table" | awk '$5 == "GLOBAL" || $5 == "WEAK" { if ($7 != "UND" && NF >= 8) { n = $8; sub(/@.*/, "", n); print n } }' | sort -u)
[ -n "$exported" ] || fail "no exported symbol found: $LIB"
bad=()
for s in $exported; do
  [ -n "${allowed[$s]:-}" ] && continue
  case "$s" in poolscope_*) continue ;; esac
  bad+=("$s")
done
if [ ${#bad[@]} -gt 0 ]; then
  echo "$table" | grep -wF -e "${bad[0]}" >&2
  fail "$LIB exports ${#bad[@]} symbol(s) beyond the interposed functions and poolscope_*: ${bad[*]}"
fi
for s in $required; do
  echo "$exported" | grep -qx "$s" || fail "$LIB does not export $s"
done
echo "--- $(echo "$exported" | wc -l) exported symbols, all allowed:" $exported
echo PASS
