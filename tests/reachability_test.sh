#!/bin/bash
# The report's reachability classes agree with memcheck's, block for block (valgrind --leak-check=full
# --leak-check-heuristics=none, no freeres), on each leak shape of leak_shapes, with pooling off and
# on. Then the prediction: memcheck run below poolscope with pooling on and no pool descriptions
# (valgrind=0) reports exactly the classes the same run's report gives under
# reconciliation.detector_view.reachability.
# One block differs in size, not in class: glibc's per-thread vector of TLS modules (possibly lost)
# has a slot for each object with TLS, and libpoolscope.so brings more of them, so possibly lost bytes
# are not compared for the modes with threads.
# Args: LIB LEAK_SHAPES MEMCHECK_SUMMARY BIG_BSS
set -euo pipefail
lib=$(readlink -f "$1"); prog=$(readlink -f "$2"); summary=$(readlink -f "$3"); big_bss=$(readlink -f "$4")
command -v valgrind >/dev/null || { echo "FAIL: valgrind is not installed"; exit 1; }
work=${TEST_TMPDIR:-$(mktemp -d)}/reachability
mkdir -p "$work"
fail=0
compare() {  # compare LABEL MEMCHECK_JSON REPORT KEY(program|detector) CHECK_POSSIBLE_BYTES
  /usr/bin/python3 - "$@" <<'PY' || fail=1
import json, sys
label, mc_path, report_path, view, possible_bytes = sys.argv[1:6]
mc = json.load(open(mc_path))
r = json.load(open(report_path))
got = r["reachability"] if view == "program" else r["reconciliation"]["detector_view"]["reachability"]
if not got.get("scanned"):
    print(f"FAIL: {label}: not scanned: {got}")
    sys.exit(1)
if view == "program":
    # The dynamic loader's table of loaded objects (a program that dlopens has one) is kept through a
    # pointer to a 64-byte boundary inside it: possibly lost or still reachable by the allocator's
    # alignment, which differs between glibc's and memcheck's (docs/report-schema.md). Both sides
    # count it still reachable.
    got = json.loads(json.dumps(got))
    for leak in r.get("leaks", []):
        if leak.get("kind") == "possibly_lost" and any(f.get("function") == "_dl_find_object_update" for f in leak.get("stack", [])):
            for f in ("blocks", "bytes"):
                got["possibly_lost"][f] -= leak[f]
                got["still_reachable"][f] += leak[f]
bad = []
for k in ["definitely_lost", "indirectly_lost", "possibly_lost", "still_reachable"]:
    if view == "detector" and k == "still_reachable":
        continue  # memcheck's count includes what poolscope allocated after the scan (its report)
    if got[k]["blocks"] != mc[k]["blocks"]:
        bad.append(f"{k}: {got[k]['blocks']} blocks, memcheck {mc[k]['blocks']}")
    elif got[k]["bytes"] != mc[k]["bytes"] and (k != "possibly_lost" or possible_bytes == "1"):
        bad.append(f"{k}: {got[k]['bytes']} bytes, memcheck {mc[k]['bytes']}")
for b in bad:
    print(f"FAIL: {label}: {b}")
if not bad:
    print(f"ok: {label}: " + ", ".join(f"{k} {got[k]['blocks']}" for k in ["definitely_lost", "indirectly_lost", "possibly_lost"]))
sys.exit(1 if bad else 0)
PY
}
for mode in list cycle global interior mmap shared_mmap merged_mmap guard_page dead_frame dead_frame_return arena_top many_lost big_list interleaved thread_ended thread_stale_stack thread_arena thread_blocked tree pool_holds self_pointer data_global data_guard relro tls pthread_key unaligned malloc0 swapcontext exit_register thread_registers dynamic_tls; do
  possible_bytes=1
  case $mode in thread_*) possible_bytes=0 ;; esac
  /usr/bin/python3 "$summary" --as-reachable _dl_find_object_update -- "$prog" "$mode" > "$work/$mode.memcheck.json"
  for pool in 0 1; do
    rm -f "$work"/r.*.json
    LD_PRELOAD="$lib" POOLSCOPE_OPTIONS="pool=$pool:quiet=1:report=$work/r.%p.json" "$prog" "$mode" > /dev/null
    compare "$mode pool=$pool" "$work/$mode.memcheck.json" "$(ls "$work"/r.*.json)" program "$possible_bytes"
  done
  # The detector's view is classified on a second thread when the process may use two CPUs and the
  # scan has 2,048 blocks or more (both views' arrays; the program's may count a pooled block twice),
  # on the exiting thread when it may use one or has fewer: the same classes, in both views.
  mv "$(ls "$work"/r.*.json)" "$work/two.json"
  LD_PRELOAD="$lib" POOLSCOPE_OPTIONS="pool=1:quiet=1:report=$work/r.%p.json" taskset -c 0 "$prog" "$mode" > /dev/null
  mv "$(ls "$work"/r.*.json)" "$work/one.json"
  /usr/bin/python3 - "$mode" "$work/two.json" "$work/one.json" "$(nproc)" <<'PY' || fail=1
import json, sys
mode, two, one, cpus = sys.argv[1], json.load(open(sys.argv[2])), json.load(open(sys.argv[3])), int(sys.argv[4])
bad = []
def blocks(view):
    return sum(view[k]["blocks"] for k in ("definitely_lost", "indirectly_lost", "possibly_lost", "still_reachable"))
program, detector = blocks(two["reachability"]), blocks(two["reconciliation"]["detector_view"]["reachability"])
threads = two["reachability"].get("scan_threads")
if cpus >= 2 and program + detector >= 2048 and threads != 2:
    bad.append(f"scan_threads {threads} with {cpus} CPUs and {program} + {detector} blocks, want 2")
if 2 * program + detector < 2048 and threads != 1:
    bad.append(f"scan_threads {threads} with {program} + {detector} blocks, want 1")
if one["reachability"].get("scan_threads") != 1:
    bad.append(f"scan_threads {one['reachability'].get('scan_threads')} on one CPU, want 1")
for name, get in [("program", lambda r: r["reachability"]),
                  ("detector", lambda r: r["reconciliation"]["detector_view"]["reachability"])]:
    for k in ["definitely_lost", "indirectly_lost", "possibly_lost", "still_reachable"]:
        if get(two)[k] != get(one)[k]:
            bad.append(f"{name} {k}: {get(two)[k]} with two threads, {get(one)[k]} with one")
for b in bad:
    print(f"FAIL: {mode} scan threads: {b}")
if not bad:
    print(f"ok: {mode}: the same classes with the scan on one thread and on two")
sys.exit(1 if bad else 0)
PY
done
# A live block with a page the program made PROT_NONE: the scan skips that page and counts it, the
# program's output and status stay its own.
rm -f "$work"/r.*.json
LD_PRELOAD="$lib" POOLSCOPE_OPTIONS="quiet=1:report=$work/r.%p.json" "$prog" guard_page > "$work/guard.out"
grep -qx "leak_shapes: guard_page done" "$work/guard.out" || { echo "FAIL: guard_page: the output was lost"; fail=1; }
/usr/bin/python3 - "$(ls "$work"/r.*.json)" <<'PY' || fail=1
import json, sys
r = json.load(open(sys.argv[1]))["reachability"]
assert r.get("unreadable_bytes") == 4096, f"FAIL: guard_page: unreadable_bytes {r.get('unreadable_bytes')}, the program made 4096 unreadable"
print("ok: guard_page: the PROT_NONE page skipped and counted")
PY
# Under a debugger the scan makes no thread of its own (gdb would show it start and end).
if command -v gdb > /dev/null; then
  rm -f "$work"/r.*.json
  gdb -q -batch -ex "set environment LD_PRELOAD=$lib" -ex "set environment POOLSCOPE_OPTIONS=quiet=1:report=$work/r.%p.json" \
    -ex run --args "$prog" list > "$work/gdb.out" 2>&1
  grep -q "New Thread\|LWP" "$work/gdb.out" && { echo "FAIL: gdb saw a thread start: $(grep -m1 'New Thread\|LWP' "$work/gdb.out")"; fail=1; }
  /usr/bin/python3 - "$(ls "$work"/r.*.json)" <<'PY' || fail=1
import json, sys
r = json.load(open(sys.argv[1]))["reachability"]
assert r["scanned"] and r["scan_threads"] == 1, f"FAIL: under gdb: scanned {r['scanned']}, scan_threads {r.get('scan_threads')}"
print("ok: under gdb the scan ran on the exiting thread alone")
PY
fi
# The prediction, in one run: memcheck below poolscope, and poolscope's report of that run.
# Every shape but fork_child (two processes: its program views are compared above, process by
# process) and dynamic_tls (the loader's table of objects, whose class follows the allocator's
# alignment, which differs between the two runs: docs/report-schema.md).
for mode in list cycle global interior mmap shared_mmap merged_mmap guard_page dead_frame dead_frame_return \
    arena_top many_lost big_list interleaved thread_ended thread_stale_stack thread_arena thread_blocked tree pool_holds \
    self_pointer data_global data_guard relro tls pthread_key unaligned malloc0 swapcontext exit_register thread_registers; do
  possible_bytes=1
  case $mode in thread_*) possible_bytes=0 ;; esac
  rm -f "$work"/r.*.json
  LD_PRELOAD="$lib" POOLSCOPE_OPTIONS="pool=1:valgrind=0:quiet=1:report=$work/r.%p.json" \
    valgrind --soname-synonyms=somalloc=nouserintercepts --leak-check=full --leak-check-heuristics=none \
    --run-libc-freeres=no --run-cxx-freeres=no "$prog" "$mode" > /dev/null 2> "$work/$mode.below.log"
  /usr/bin/python3 "$summary" --log "$work/$mode.below.log" > "$work/$mode.below.json"
  # (Inside valgrind no other thread's registers can be read: the report of that run is not compared
  # for the shape that keeps its pointer in one; the normal run's prediction below is.)
  if [ "$mode" != thread_registers ]; then
    compare "$mode below poolscope" "$work/$mode.below.json" "$(ls "$work"/r.*.json)" detector "$possible_bytes"
  fi
  # The same prediction from a normal run, which is what users read: the allocator below is then
  # glibc's, whose alignment differs from memcheck's, and the classes must not depend on it.
  rm -f "$work"/r.*.json
  LD_PRELOAD="$lib" POOLSCOPE_OPTIONS="pool=1:quiet=1:report=$work/r.%p.json" "$prog" "$mode" > /dev/null
  compare "$mode below poolscope, predicted by a normal run" "$work/$mode.below.json" "$(ls "$work"/r.*.json)" detector "$possible_bytes"
  # The detector's unfreed blocks and bytes are its classes' sum: a pool counts what the allocator
  # below holds for it, as memcheck counts it.
  /usr/bin/python3 - "$(ls "$work"/r.*.json)" "$mode" <<'PY' || fail=1
import json, sys
d = json.load(open(sys.argv[1]))["reconciliation"]["detector_view"]
kinds = ["definitely_lost", "indirectly_lost", "possibly_lost", "still_reachable"]
blocks, nbytes = (sum(d["reachability"][k][f] for k in kinds) for f in ("blocks", "bytes"))
assert (d["unfreed_blocks"], d["unfreed_bytes"]) == (blocks, nbytes), \
    f"FAIL: {sys.argv[2]}: unfreed {d['unfreed_blocks']} blocks, {d['unfreed_bytes']} bytes; classes {blocks}, {nbytes}"
print(f"ok: {sys.argv[2]}: unfreed {blocks} blocks, {nbytes} bytes, as the detector's classes")
PY
  # The list's nodes are small: pooled, every lost one is hidden from the detector below.
  if [ "$mode" = list ]; then
    /usr/bin/python3 - "$(ls "$work"/r.*.json)" <<'PY' || fail=1
import json, sys
r = json.load(open(sys.argv[1]))
p, h = r["reachability"], r["reconciliation"]["detector_view"]["hidden_in_pools"]
lost = p["definitely_lost"]["blocks"] + p["indirectly_lost"]["blocks"]
assert lost == 10 and h["blocks"] == lost, f"FAIL: hidden_in_pools {h}, the program loses {lost}"
print(f"ok: list: {h['blocks']} lost blocks hidden in pools")
PY
  fi
done
# A forked child's report holds the child's classes, its parent's the parent's: each equals what
# memcheck (which follows the fork) says of that process.
mkdir -p "$work/fork"
rm -f "$work"/fork/*
valgrind --log-file="$work/fork/mc.%p.log" --leak-check=full --leak-check-heuristics=none --run-libc-freeres=no \
  --run-cxx-freeres=no "$prog" fork_child > /dev/null
for pool in 0 1; do
  rm -f "$work"/fork/r.*.json
  LD_PRELOAD="$lib" POOLSCOPE_OPTIONS="pool=$pool:quiet=1:report=$work/fork/r.%p.json" "$prog" fork_child > /dev/null
  for who in parent child; do
    # memcheck's logs name their parent's pid (the child's parent has a log too); the reports say
    # which process was forked.
    read -r log report < <(/usr/bin/python3 - "$who" "$work/fork" <<'PY'
import glob, json, os, re, sys
who, d = sys.argv[1], sys.argv[2]
logs = {}
for f in glob.glob(os.path.join(d, "mc.*.log")):
    logs[int(f.split(".")[-2])] = int(re.search(r"Parent PID: (\d+)", open(f).read()).group(1))
log = [p for p, parent in logs.items() if (parent in logs) == (who == "child")]
report = [f for f in glob.glob(os.path.join(d, "r.*.json"))
          if (json.load(open(f))["process"].get("forked_from") is not None) == (who == "child")]
print(os.path.join(d, f"mc.{log[0]}.log") if len(log) == 1 else "none", report[0] if len(report) == 1 else "none")
PY
)
    /usr/bin/python3 "$summary" --log "$log" > "$work/fork/$who.json"
    compare "fork_child pool=$pool: the $who" "$work/fork/$who.json" "$report" program 1
  done
done
# The program's classes from a run under valgrind (memcheck's view of memory: what it holds no-access
# or undefined is no pointer) are memcheck's: a thread blocked in a system call keeps its block on
# its stack, in the page that holds its stack pointer.
for mode in thread_blocked list tls; do
  possible_bytes=1
  case $mode in thread_*) possible_bytes=0 ;; esac
  rm -f "$work"/r.*.json
  LD_PRELOAD="$lib" POOLSCOPE_OPTIONS="pool=1:quiet=1:report=$work/r.%p.json" \
    valgrind -q --soname-synonyms=somalloc=nouserintercepts --leak-check=no "$prog" "$mode" > /dev/null 2>&1
  compare "$mode program view under valgrind" "$work/$mode.memcheck.json" "$(ls "$work"/r.*.json)" program "$possible_bytes"
done
# Blocks that exist only because poolscope is loaded would be named in loaded_by_poolscope; libpoolscope.so
# loads no object of its own at start, so there are none, in C programs (true, sqlite3) as in leak_shapes
# (which links libstdc++ itself), and still_reachable is memcheck's, block for block.
printf 'create table t(a, b); insert into t values (1, 2); select * from t;\n' > "$work/in.sql"
for cmd in "/bin/true" "/usr/bin/sqlite3 :memory:" "$prog none"; do
  name=${cmd%% *}; name=${name##*/}
  # shellcheck disable=SC2086
  /usr/bin/python3 "$summary" -- $cmd < "$work/in.sql" > "$work/$name.memcheck.json" 2> /dev/null
  rm -f "$work"/r.*.json
  # shellcheck disable=SC2086
  LD_PRELOAD="$lib" POOLSCOPE_OPTIONS="quiet=1:report=$work/r.%p.json" $cmd < "$work/in.sql" > /dev/null
  /usr/bin/python3 - "$work/$name.memcheck.json" "$(ls "$work"/r.*.json)" "$name" <<'PY' || fail=1
import json, sys
mc, r, name = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))["reachability"], sys.argv[3]
own = r["loaded_by_poolscope"]
assert own == {"blocks": 0, "bytes": 0, "objects": []}, f"FAIL: {name}: loaded_by_poolscope {own}, expected none"
program = {k: r["still_reachable"][k] for k in ("blocks", "bytes")}
assert program == mc["still_reachable"], f"FAIL: {name}: still reachable {program}, memcheck {mc['still_reachable']}"
print(f"ok: {name}: still reachable {r['still_reachable']['blocks']}, {own['blocks']} of them poolscope's ({own['objects']}), memcheck {mc['still_reachable']['blocks']}")
PY
done
# A heap of a million blocks (arrays of tens of megabytes in the scan, in huge pages where the kernel
# gives them) is scanned whole: 300,000 (int, str) tuples are three blocks each, every one classified.
rm -f "$work"/r.*.json
PYTHONMALLOC=malloc LD_PRELOAD="$lib" POOLSCOPE_OPTIONS="quiet=1:report=$work/r.%p.json" /usr/bin/python3 -c '
import os
keep = [(i, str(i)) for i in range(1000, 301000)]
os._exit(0)'
/usr/bin/python3 - "$(ls "$work"/r.*.json)" <<'PY' || fail=1
import json, sys
r = json.load(open(sys.argv[1]))["reachability"]
assert r.get("scanned"), f"FAIL: the large heap was not scanned: {r}"
n = sum(r[k]["blocks"] for k in ("definitely_lost", "indirectly_lost", "possibly_lost", "still_reachable"))
assert n >= 3 * 300000, f"FAIL: {n} blocks classified, the program keeps at least {3 * 300000}"
print(f"ok: python3 keeping 300,000 tuples: {n} blocks classified in {r['scan_ms']} ms")
PY
# Reserved address space that was never touched holds no pointer and is not read: a python3 that maps
# 512 MiB privately and writes one page has roots far below that (the touched pages stay roots: the
# list and global shapes above keep their pointers in such pages).
rm -f "$work"/r.*.json
LD_PRELOAD="$lib" POOLSCOPE_OPTIONS="quiet=1:report=$work/r.%p.json" /usr/bin/python3 -c '
import mmap, os, sys
m = mmap.mmap(-1, 512 << 20, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
m[4096:4104] = b"poolscop"
print(m[4096:4104].decode())
sys.stdout.flush()
os._exit(0)  # the mapping still there at exit' > "$work/mmap.out"
/usr/bin/python3 - "$(ls "$work"/r.*.json)" <<'PY' || fail=1
import json, sys
rb = json.load(open(sys.argv[1]))["reachability"]["roots_bytes"]
assert rb < (128 << 20), f"FAIL: roots_bytes {rb}: the untouched 512 MiB mapping was read"
print(f"ok: python3 with 512 MiB mapped, one page written: roots_bytes {rb}")
PY
grep -qx poolscop "$work/mmap.out" || { echo "FAIL: python3's output changed"; fail=1; }
# Nor an object's globals never touched, in any view: LeakSanitizer's reads every loaded object's
# writable segments, of which a .bss may be mostly reserve (big_bss: 64 MiB, one page written, and
# poolscope's own tables). The block kept there stays reachable.
rm -f "$work"/r.*.json
LD_PRELOAD="$lib" POOLSCOPE_OPTIONS="quiet=1:report=$work/r.%p.json" "$big_bss" > "$work/big_bss.out"
/usr/bin/python3 - "$(ls "$work"/r.*.json)" <<'PY' || fail=1
import json, sys
r = json.load(open(sys.argv[1]))
reach, lsan = r["reachability"], r["reconciliation"]["detector_view"]["lsan"]
read = reach["roots_read_bytes"]
assert lsan["scanned"], f"FAIL: big_bss: LeakSanitizer's view not computed: {lsan}"
assert read < (16 << 20), f"FAIL: big_bss: roots_read_bytes {read}: untouched globals were read"
assert reach["definitely_lost"]["blocks"] == 0 and lsan["leaked"]["blocks"] == 0, f"FAIL: big_bss: {reach} {lsan}"
print(f"ok: 64 MiB of globals, one page written: roots_read_bytes {read}, the block reachable in every view")
PY
[ "$("$big_bss")" = "$(cat "$work/big_bss.out")" ] || { echo "FAIL: big_bss's output changed"; fail=1; }
[ "$fail" -eq 0 ] || exit 1
echo PASS
