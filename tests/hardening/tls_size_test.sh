#!/bin/bash
# glibc carves a preloaded library's static TLS out of every thread's stack, and a thread made with
# PTHREAD_STACK_MIN has 16 KiB in all: the library's PT_TLS segment (readelf -l) must stay within
# 2 KiB, about what jemalloc takes (2.6 KiB). Per-thread state that is larger (the inline carve table,
# the capture memo, the stack cache) lives in memory poolscope maps. small_stacks_test runs such threads.
# Args: LIB
set -u
LIB=$(readlink -f "$1")
fail() { echo "FAIL: $*" >&2; exit 1; }
command -v readelf >/dev/null || fail "readelf is required (binutils)"
budget=2048
# Columns of a program header: Type Offset VirtAddr PhysAddr FileSiz MemSiz Flg Align
line=$(readelf -lW "$LIB" | awk '$1 == "TLS"') || fail "readelf failed on $LIB"
[ -n "$line" ] || { echo "PASS: $LIB has no TLS segment"; exit 0; }
memsz=$(awk '{ print $6 }' <<<"$line")
bytes=$((memsz))
echo "TLS segment: $line"
[ "$bytes" -le "$budget" ] || fail "$LIB takes $bytes bytes of static TLS from every thread's stack (budget $budget)"
echo "PASS: $bytes bytes of static TLS (budget $budget)"
