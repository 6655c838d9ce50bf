#!/bin/bash
# What writing the exit report costs a large program: clang++-14 -O2 -c of a small file and rustc -O of
# a small program (libLLVM, librustc_driver and rust-lld have symbol tables of 45k to 260k entries),
# each with poolscope's defaults and the report written, against the same with report=none.
# bench/interleave.py runs the two configurations (and bare) in turn, round after round; the ratio of
# their medians is the report's cost.
#
#   bench/report_cost.sh                  builds with -c opt, then runs (a few minutes)
#   SKIP_BUILD=1 LIB=/path/libpoolscope.so bench/report_cost.sh
#   REPS=10 WARMUP=2                      rounds, and runs of each program before them
#   COLD=1                                every run starts with an empty symbol cache ($XDG_CACHE_HOME
#                                         under the work directory, its debug/ copies kept), so each
#                                         report symbolizes every frame itself (hyperfine, whose
#                                         --prepare empties it: each command's runs in a block)
#
# Then prints process.report_ms of one more report of each program (rustc: every process that wrote
# one). Needs clang++-14, rustc and python3 (and hyperfine for COLD=1).
set -euo pipefail

cd "$(dirname "$0")/.."
REPS=${REPS:-10}
WARMUP=${WARMUP:-2}
if [[ -z "${SKIP_BUILD:-}" ]]; then
  bazel build -c opt //interpose:libpoolscope.so
fi
LIB=$(realpath "${LIB:-bazel-bin/interpose/libpoolscope.so}")
WORK=$(mktemp -d "${TMPDIR:-/tmp}/report_cost.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

cat >"$WORK/x.cc" <<'SRC'
#include <string>
#include <vector>
int f(std::vector<std::string>& v) { v.push_back("hello"); return static_cast<int>(v.size()); }
int main() { std::vector<std::string> v; return f(v); }
SRC
cat >"$WORK/x.rs" <<'SRC'
fn main() {
    let v: Vec<u32> = (0..10).collect();
    println!("{}", v.iter().sum::<u32>());
}
SRC

# The symbol cache: the user's own, or (COLD=1) a fresh one before every run, holding only the
# uncompressed debug files the user's cache already has (making those is a once-per-machine cost).
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}
PREPARE=()
if [[ -n "${COLD:-}" ]]; then
  # hyperfine -N runs --prepare without a shell too.
  PREPARE=(--prepare "sh -c 'rm -rf $WORK/xdg && mkdir -p $WORK/xdg/poolscope && { cp -r $CACHE/poolscope/debug $WORK/xdg/poolscope/ 2>/dev/null || true; }'")
  CACHE=$WORK/xdg
fi
RUN="env XDG_CACHE_HOME=$CACHE LD_PRELOAD=$LIB"

# One command under two environments: the report written, and report=none (and bare, which
# interleave.py always measures). Each round runs every configuration once, in turn; COLD=1 needs
# hyperfine's --prepare, so it runs each command's rounds in a block instead.
ratio() {  # ratio PROG LOG: the ratio of the two medians interleave.py printed
  awk -v prog="$1" '$1 == "report" {a = $3} $1 == "no_report" {b = $3}
    END {printf "%s: median %.3f s with the report, %.3f s with report=none: %.2fx (interleaved)\n", prog, a / 1000, b / 1000, a / b}' "$2"
}
cd "$WORK"
if [[ -n "${COLD:-}" ]]; then
  hyperfine -N -w "$WARMUP" -r "$REPS" "${PREPARE[@]}" \
    -n clang-report "$RUN POOLSCOPE_OPTIONS=report=$WORK/clang.json clang++-14 -O2 -c x.cc -o x.o" \
    -n clang-report=none "$RUN POOLSCOPE_OPTIONS=report=none clang++-14 -O2 -c x.cc -o x.o" \
    --export-json "$WORK/clang-hf.json"
  hyperfine -N -w "$WARMUP" -r "$REPS" "${PREPARE[@]}" \
    -n rustc-report "$RUN POOLSCOPE_OPTIONS=report=$WORK/rust.%p.json rustc -O x.rs -o x" \
    -n rustc-report=none "$RUN POOLSCOPE_OPTIONS=report=none rustc -O x.rs -o x" \
    --export-json "$WORK/rustc-hf.json"
else
  INTERLEAVE=$(realpath "$OLDPWD/bench/interleave.py")
  ENV="XDG_CACHE_HOME=$CACHE LD_PRELOAD=$LIB"
  for i in $(seq "$WARMUP"); do
    env XDG_CACHE_HOME="$CACHE" LD_PRELOAD="$LIB" POOLSCOPE_OPTIONS=report="$WORK/warm.%p.json" \
      clang++-14 -O2 -c x.cc -o x.o 2>/dev/null
    env XDG_CACHE_HOME="$CACHE" LD_PRELOAD="$LIB" POOLSCOPE_OPTIONS=report="$WORK/warm.%p.json" \
      rustc -O x.rs -o x 2>/dev/null
  done
  "$INTERLEAVE" --rounds "$REPS" --cpu all \
    --config "report $ENV POOLSCOPE_OPTIONS=report=$WORK/clang.json" \
    --config "no_report $ENV POOLSCOPE_OPTIONS=report=none" \
    -- clang++-14 -O2 -c x.cc -o x.o | tee "$WORK/clang.log"
  "$INTERLEAVE" --rounds "$REPS" --cpu all \
    --config "report $ENV POOLSCOPE_OPTIONS=report=$WORK/rust.%p.json" \
    --config "no_report $ENV POOLSCOPE_OPTIONS=report=none" \
    -- rustc -O x.rs -o x | tee "$WORK/rustc.log"
fi

rm -f "$WORK"/rust.*.json
if [[ -n "${COLD:-}" ]]; then eval "${PREPARE[1]}"; fi
$RUN POOLSCOPE_OPTIONS=report="$WORK/clang.json" clang++-14 -O2 -c x.cc -o x.o 2>/dev/null
if [[ -n "${COLD:-}" ]]; then eval "${PREPARE[1]}"; fi
$RUN POOLSCOPE_OPTIONS=report="$WORK/rust.%p.json" rustc -O x.rs -o x 2>/dev/null
python3 - "$WORK" <<'PY'
import glob, json, statistics, sys
work = sys.argv[1]
for prog in ("clang", "rustc"):
    if not glob.glob(f"{work}/{prog}-hf.json"):
        continue
    runs = json.load(open(f"{work}/{prog}-hf.json"))["results"]
    med = {r["command"]: statistics.median(r["times"]) for r in runs}
    a, b = med[f"{prog}-report"], med[f"{prog}-report=none"]
    print(f"{prog}: median {a:.3f} s with the report, {b:.3f} s with report=none: {a / b:.2f}x")
for path in [f"{work}/clang.json"] + sorted(glob.glob(f"{work}/rust.*.json")):
    p = json.load(open(path))["process"]
    print(f"report_ms {p['report_ms']:6d}  {p['exe']}")
PY
if [[ -z "${COLD:-}" ]]; then ratio clang "$WORK/clang.log"; ratio rustc "$WORK/rustc.log"; fi
