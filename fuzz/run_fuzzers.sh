#!/usr/bin/env bash
# File: fuzz/run_fuzzers.sh
#
# Builds poolscope's libFuzzer targets with clang++ (-fsanitize=fuzzer,address,undefined) straight
# from the sources (Bazel 4.2.3 with GCC cannot build them) and runs each for a bounded time.
#
#   fuzz/run_fuzzers.sh [SECONDS] [TARGET...]     default 60 s each, every target
#
# Targets: options (interpose/options.cc: ParseOptions), report (report/report_model.cc: LoadReport and
# the renderers), pool_model (pool/pool.cc: ThreadCache over FakeBackend against a model).
# Seeds and regression inputs: fuzz/corpus/<target>/ (read-only here; new inputs go to the work folder).
# Work folder: $FUZZ_OUT (default ${TMPDIR:-/tmp}/poolscope-fuzz): binaries, corpus/<target>/ (grown),
# artifacts/<target>/ (crash-*, leak-*, timeout-* reproducers). Exit status: 0 no target found anything,
# 1 a target crashed (the reproducer path is printed), 2 a build failed or bad usage.
# Reproduce one: $FUZZ_OUT/<target>_fuzzer ARTIFACT
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2

SECONDS_EACH=${1:-60}
shift || true
case "$SECONDS_EACH" in
  ''|*[!0-9]*) echo "usage: fuzz/run_fuzzers.sh [SECONDS] [options|report|pool_model ...]" >&2; exit 2 ;;
esac
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=(options report pool_model)

CXX=${CXX_FUZZ:-clang++-14}
command -v "$CXX" >/dev/null || CXX=clang++
command -v "$CXX" >/dev/null || { echo "run_fuzzers: clang++ not found" >&2; exit 2; }
OUT=${FUZZ_OUT:-${TMPDIR:-/tmp}/poolscope-fuzz}
mkdir -p "$OUT"
FLAGS=(-std=c++17 -g -O1 -fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined
       -fno-sanitize-recover=undefined -I. -w)

sources_for() {
  case "$1" in
    options) echo fuzz/options_fuzzer.cc interpose/options.cc ;;
    report) echo fuzz/report_fuzzer.cc report/report_model.cc report/format_util.cc report/html_charts.cc report/html_report.cc \
                 report/html_compare.cc report/html_page.cc report/leak_diff.cc report/stack_frames.cc \
                 report/ledger_table.cc report/site_pinning.cc report/suppressions.cc report/text_report.cc ;;
    pool_model) echo fuzz/pool_model_fuzzer.cc pool/pool.cc pool/pool_map.cc ;;
    *) return 1 ;;
  esac
}

# Libraries a target links besides its sources: Debian's shared Abseil for absl::Status.
libs_for() {
  case "$1" in
    report) echo -labsl_statusor -labsl_status -labsl_cord -labsl_strings ;;
  esac
}

status=0
for t in "${TARGETS[@]}"; do
  srcs=$(sources_for "$t") || { echo "run_fuzzers: unknown target $t" >&2; exit 2; }
  bin=$OUT/${t}_fuzzer
  # Rebuild only when a source is newer than the binary.
  rebuild=1
  if [ -x "$bin" ]; then
    rebuild=0
    for f in $srcs fuzz/run_fuzzers.sh; do [ "$f" -nt "$bin" ] && rebuild=1; done
  fi
  if [ "$rebuild" = 1 ]; then
    echo "== build $t" >&2
    start=$(date +%s)
    # One object per source, compiled in parallel (nproc jobs), then linked.
    objdir=$OUT/obj/$t
    rm -rf "$objdir"
    mkdir -p "$objdir"
    jobs=$(nproc 2>/dev/null || echo 2)
    objs=()
    pids=()
    for src in $srcs; do
      obj=$objdir/$(echo "$src" | tr / _).o
      objs+=("$obj")
      "$CXX" "${FLAGS[@]}" -DFMT_HEADER_ONLY -c "$src" -o "$obj" &
      pids+=($!)
      while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do sleep 0.2; done
    done
    ok=1
    for pid in "${pids[@]}"; do wait "$pid" || ok=0; done
    if [ "$ok" = 0 ] || ! "$CXX" "${FLAGS[@]}" "${objs[@]}" -o "$bin.tmp" -lpthread $(libs_for "$t"); then
      echo "run_fuzzers: $t: build failed" >&2
      exit 2
    fi
    mv "$bin.tmp" "$bin"
    echo "== built $t in $(( $(date +%s) - start )) s" >&2
  fi
  work=$OUT/corpus/$t
  art=$OUT/artifacts/$t
  mkdir -p "$work" "$art"
  seeds=fuzz/corpus/$t
  [ -d "$seeds" ] || seeds=
  echo "== run $t for ${SECONDS_EACH}s" >&2
  log=$OUT/$t.log
  # 0 seconds: replay the seeds and regression inputs only.
  if [ "$SECONDS_EACH" = 0 ]; then limit="-runs=0"; else limit="-max_total_time=$SECONDS_EACH"; fi
  # The seeds (and regression inputs) are replayed first; a crash on one of them fails at once.
  ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1} \
  UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
    "$bin" $limit -timeout=20 -rss_limit_mb=2560 -max_len=8192 \
      -print_final_stats=1 -artifact_prefix="$art/" "$work" $seeds >"$log" 2>&1
  rc=$?
  grep -E '^(#[0-9]+ +DONE|stat::number_of_executed_units|stat::peak_rss_mb)' "$log" | tr '\n' ' ' >&2
  echo >&2
  if [ "$rc" -ne 0 ]; then
    status=1
    echo "run_fuzzers: $t FOUND A PROBLEM (exit $rc); log $log; the last 40 lines:" >&2
    tail -40 "$log" >&2
    ls -1 "$art" | sed "s|^|  reproducer: $art/|" >&2
    echo "  reproduce: $bin <reproducer>" >&2
  else
    echo "== $t: no crash in ${SECONDS_EACH}s ($(ls "$work" | wc -l) inputs in the work corpus)" >&2
  fi
done
exit "$status"
