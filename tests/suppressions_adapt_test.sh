#!/bin/bash
# `poolscope suppressions --adapt FILE` with the real tools and the real library: suppression files
# written for supp_leaks run bare, as a user writes them (the allocation function, then the caller),
# suppress with libpoolscope.so preloaded (pool=1) what they suppress bare, and no more.
# - memcheck (--soname-synonyms=somalloc=nouserintercepts, the adapted file plus
#   `poolscope suppressions --format=valgrind` for the pools), valgrind=1 and valgrind=0: the loss
#   records and invalid frees left unsuppressed are bare's, caller by caller, kind by kind, blocks and
#   bytes (with valgrind=0, those of bare's callers whose blocks no pool serves: memcheck does not see
#   the others), none is a pool's, and the blocks suppressed are bare's (the same callers') plus the
#   pools live at exit by the run's report. The file as written (not adapted) fails that: the
#   callers bare suppresses are reported.
# - LeakSanitizer (supp_leaks built with it) and heaptrack below poolscope: the `leak:` file comes
#   back unchanged; with the pool lines appended, the leaks left are bare's among the callers whose
#   blocks these tools still see (none a pool's), the patterns of those callers that make no pool
#   suppress what they suppress bare, and the file as written does the same. A pattern naming a function of
#   libpoolscope.so on those leaks' stacks is warned about, and does suppress them preloaded only.
# Which callers' blocks a pool serves is read from bare memcheck's sizes: at most the pool size.
# Args: LIB POOLSCOPE SUPP_LEAKS SUPP_LEAKS_LSAN
set -euo pipefail
lib=$(readlink -f "$1"); poolscope=$(readlink -f "$2"); prog=$(readlink -f "$3"); lsan_prog=$(readlink -f "$4")
work=${TEST_TMPDIR:-$(mktemp -d)}/suppressions_adapt
rm -rf "$work" && mkdir -p "$work"
for tool in valgrind heaptrack_print; do
  command -v "$tool" > /dev/null || { echo "FAIL: $tool is not installed"; exit 1; }
done
ht_preload=/usr/lib/heaptrack/libheaptrack_preload.so
ht_interpret=/usr/lib/heaptrack/libexec/heaptrack_interpret
for f in "$ht_preload" "$ht_interpret"; do [ -e "$f" ] || { echo "FAIL: $f is missing"; exit 1; }; done
PY=/usr/bin/python3
pool_size=64
fail=0

# The files a user keeps for the program run bare: every caller but kept_small, kept_big and
# inner_alloc. The entry for outer_call's own mallocs does not match inner_alloc's blocks bare (a frame
# of the program's lies between), and must not with poolscope.
cat > "$work/user.supp" <<'EOF'
# supp_leaks: known leaks and frees, run bare.
{
   small-malloc
   Memcheck:Leak
   match-leak-kinds: definite
   fun:malloc
   fun:small_malloc
}
{
   small-calloc
   Memcheck:Leak
   fun:calloc
   fun:small_calloc
   fun:main
}
{
   dup-string
   Memcheck:Leak
   fun:malloc
   fun:strdup
   fun:dup_string
}
{
   big-malloc
   Memcheck:Leak
   fun:malloc
   fun:big_malloc
}
{
   grow
   Memcheck:Leak
   fun:realloc
   fun:grow
}
{
   aligned
   Memcheck:Leak
   fun:memalign
   fun:posix_memalign
   fun:aligned
}
{
   outer-call
   Memcheck:Leak
   fun:malloc
   fun:outer_call
}
{
   free-not-heap
   Memcheck:Free
   fun:free
   fun:free_not_heap
}
{
   free-twice
   Memcheck:Free
   fun:free
   fun:free_twice
}
# Another program's: kept as it is.
{
   other-program
   Memcheck:Cond
   fun:parse_header
}
EOF
cat > "$work/user.lsan" <<'EOF'
# supp_leaks: known leaks, run bare.
leak:small_malloc
leak:small_calloc
leak:dup_string
leak:big_malloc
leak:grow
leak:aligned
EOF

# ---- the logs, as JSON -----------------------------------------------------------------------------
cat > "$work/logs.py" <<'PY'
"""memcheck, LeakSanitizer and heaptrack_print output of supp_leaks as JSON: what is left unsuppressed
by the program's caller, what has a pool's stack, the suppressed totals, libpoolscope.so's frames."""
import json, re, sys

CALLERS = ["small_malloc", "kept_small", "small_calloc", "dup_string", "big_malloc", "kept_big", "grow",
           "aligned", "inner_alloc", "free_not_heap", "free_twice"]
POOL = re.compile(r"AllocPool|PoolFromMalloc|poolscope_pool_alloc|Domain::CreatePool")


def num(text):
    return int(text.replace(",", ""))


def caller(functions):
    return next((f for f in functions if f in CALLERS), None)


def add(table, key, blocks, nbytes):
    have = table.setdefault(key, [0, 0])
    have[0] += blocks
    have[1] += nbytes


def memcheck(text):
    """leaks {"caller kind": [blocks, bytes]}, errors {"caller": count}, sizes {caller: bytes a block}."""
    out = {"leaks": {}, "errors": {}, "sizes": {}, "pool_records": 0, "other": {}, "suppressed": None}
    lines = text.split("\n")
    frame = re.compile(r"==\d+==    (?:at|by) 0x[0-9A-Fa-f]+: (.*)$")
    loss = re.compile(r"==\d+== ([\d,]+)(?: \([\d,]+ direct, [\d,]+ indirect\))? bytes in ([\d,]+) blocks "
                      r"are (.+?) in loss record")
    for i, line in enumerate(lines):
        m = loss.match(line)
        error = re.match(r"==\d+== (Invalid free|Mismatched free)", line)
        if not m and not error:
            continue
        stack = []
        for later in lines[i + 1:]:
            f = frame.match(later)
            if not f:
                break
            stack.append(f.group(1))
        functions = [s.split(" (")[0] for s in stack]
        who = caller(functions)
        if m:
            nbytes, blocks = num(m.group(1)), num(m.group(2))
            if any(POOL.search(s) for s in stack):
                out["pool_records"] += 1
            elif who is None:  # not the program's callers' (libstdc++'s start-up)
                add(out["other"], f"{nbytes // blocks} {m.group(3)}", blocks, nbytes)
            else:
                add(out["leaks"], f"{who} {m.group(3)}", blocks, nbytes)
                out["sizes"][who] = nbytes // blocks
        else:
            if who is None:
                add(out["other"], line.split("== ", 1)[1], 1, 0)
                continue
            out["errors"][who] = out["errors"].get(who, 0) + 1
            end = next((j for j in range(i + 1, len(lines)) if re.fullmatch(r"==\d+== ", lines[j])), len(lines))
            size = re.search(r"inside a block of size ([\d,]+)", "\n".join(lines[i:end]))
            out["sizes"][who] = num(size.group(1)) if size else None
    s = re.search(r"==\d+==\s+suppressed: ([\d,]+) bytes in ([\d,]+) blocks", text)
    out["suppressed"] = num(s.group(2)) if s else 0
    if "LEAK SUMMARY" not in text and "no leaks are possible" not in text:
        add(out["other"], "no leak summary", 1, 0)
    return out


def poolscope_functions(stacks):
    """The functions of libpoolscope.so on stacks that are not a pool's, without their parameters."""
    names = set()
    for stack in stacks:
        if any(POOL.search(f) for f, _ in stack) or caller([f for f, _ in stack]) is None:
            continue
        names.update(re.match(r"(?:\(anonymous namespace\)|[^(])*", f).group(0)
                     for f, where in stack if "libpoolscope.so" in where)
    return names


def lsan(text):
    """leaks {caller: [objects, bytes]}, used {template: [count, bytes]}, poolscope's functions."""
    out = {"leaks": {}, "used": {}, "pool_records": 0, "other": [], "poolscope": []}
    stacks = []
    for m in re.finditer(r"(?:Direct|Indirect) leak of (\d+) byte\(s\) in (\d+) object\(s\) allocated "
                         r"from:\n((?:    #.*\n)+)", text):
        stack = []
        for f in m.group(3).splitlines():
            parts = re.match(r"\s+#\d+ 0x[0-9a-f]+ in (.*?)(?: (\(.*\)|\S+:\d+))?$", f)
            stack.append((parts.group(1), parts.group(2) or "") if parts else (f, ""))
        stacks.append(stack)
        who = caller([s for s, _ in stack])
        if any(POOL.search(s) for s, _ in stack):
            out["pool_records"] += 1
        elif who is None:
            out["other"].append(stack[0][0])
        else:
            add(out["leaks"], who, int(m.group(2)), int(m.group(1)))
    used = re.search(r"Suppressions used:\n.*template\n((?:\s+\d+\s+\d+ .*\n)+)", text)
    for row in (used.group(1).splitlines() if used else []):
        count, nbytes, template = row.split(None, 2)
        out["used"][template] = [int(count), int(nbytes)]
    out["poolscope"] = sorted(poolscope_functions(stacks))
    return out


def heaptrack(text):
    """leaks {caller: "BYTES over CALLS"}, used {pattern: "MATCHES LEAKED"}, poolscope's functions."""
    out = {"leaks": {}, "used": {}, "pool_records": 0, "other": [], "poolscope": []}
    section = text.split("\nMEMORY LEAKS\n", 1)[1].split("\nMOST TEMPORARY ALLOCATIONS\n", 1)[0]
    stacks = []
    for group in re.split(r"\n(?=\S+ leaked over \d+ calls from\n)", "\n" + section):
        head = re.match(r"\n?(\S+ leaked over \d+ calls from)\n(\S.*)\n((?:  .*\n)*)", group + "\n")
        if not head:
            continue
        top = (head.group(2), " ".join(re.findall(r"^\s+in (.*)$", head.group(3), re.M)))
        for sub in re.finditer(r"(\S+) leaked over (\d+) calls from:\n((?:    .*\n)*)", group + "\n"):
            stack = [top]
            for f in re.finditer(r"^    (\S.*)\n((?:      .*\n)*)", sub.group(3), re.M):
                stack.append((f.group(1), " ".join(re.findall(r"^\s+in (.*)$", f.group(2), re.M))))
            stacks.append(stack)
            who = caller([s for s, _ in stack])
            if any(POOL.search(s) for s, _ in stack):
                out["pool_records"] += 1
            elif who is None:
                out["other"].append(stack[0][0])
            else:
                out["leaks"][who] = f"{sub.group(1)} over {sub.group(2)}"
    used = text.split("Suppressions used:\n", 1)
    for row in (used[1].splitlines()[1:] if len(used) == 2 else []):
        parts = row.split()
        if len(parts) != 3 or not parts[0].isdigit():
            break
        out["used"][parts[2]] = f"{parts[0]} {parts[1]}"
    out["poolscope"] = sorted(poolscope_functions(stacks))
    return out


if __name__ == "__main__":
    kind, path = sys.argv[1], sys.argv[2]
    print(json.dumps({"memcheck": memcheck, "lsan": lsan, "heaptrack": heaptrack}[kind](
        open(path, errors="replace").read()), sort_keys=True))
PY
parse() { "$PY" "$work/logs.py" "$@"; }
live_pools() {
  "$PY" -c 'import json, sys; p = json.load(open(sys.argv[1]))["pool"]; print(p["pools_cached_at_exit"] + p["pools_in_use_at_exit"])' "$1"
}

# ---- memcheck ----------------------------------------------------------------------------------------
vg=(valgrind --leak-check=full --show-leak-kinds=all --num-callers=30 --run-libc-freeres=no
    --run-cxx-freeres=no)
"${vg[@]}" --log-file="$work/bare.log" "$prog" frees
"${vg[@]}" --suppressions="$work/user.supp" --log-file="$work/bare.user.log" "$prog" frees
parse memcheck "$work/bare.log" > "$work/bare.json"
parse memcheck "$work/bare.user.log" > "$work/bare.user.json"

LD_PRELOAD="$lib" POOLSCOPE_OPTIONS="quiet=1:report=$work/any.json" "$prog" > /dev/null
"$poolscope" suppressions --format=valgrind "$work/any.json" > "$work/pools.supp"
"$poolscope" suppressions --adapt "$work/user.supp" > "$work/adapted.supp" 2> "$work/adapt.err"
[ ! -s "$work/adapt.err" ] || { echo "FAIL: --adapt said: $(cat "$work/adapt.err")"; fail=1; }

for v in 1 0; do
  for file in adapted user; do
    LD_PRELOAD="$lib" POOLSCOPE_OPTIONS="pool=1:pool_size=$pool_size:valgrind=$v:quiet=1:report=$work/$file.$v.json" \
      "${vg[@]}" --soname-synonyms=somalloc=nouserintercepts --suppressions="$work/$file.supp" \
      --suppressions="$work/pools.supp" --log-file="$work/$file.$v.log" "$prog" frees
    parse memcheck "$work/$file.$v.log" > "$work/$file.$v.parsed.json"
  done
  "$PY" - "$v" "$pool_size" "$work/bare.json" "$work/bare.user.json" "$work/adapted.$v.parsed.json" \
    "$work/adapted.$v.json" "$work/user.$v.parsed.json" <<'PY' || fail=1
import json, sys
v, pool_size = sys.argv[1], int(sys.argv[2])
bare, user, adapted, unadapted = (json.load(open(p)) for p in sys.argv[3:6] + sys.argv[7:8])
report = sys.argv[6]
label = f"memcheck valgrind={v}"
ok = True
def check(what, got, want):
    global ok
    if got != want:
        print(f"FAIL: {label}: {what} is {got}, expected {want}")
        ok = False
# Bare, with the user's file: kept_small and kept_big left; the rest suppressed.
suppressed_callers = {k.split()[0] for k in bare["leaks"]} - {k.split()[0] for k in user["leaks"]}
check("the callers bare memcheck suppresses", sorted(suppressed_callers),
      sorted(["small_malloc", "small_calloc", "dup_string", "big_malloc", "grow", "aligned"]))
check("the invalid frees bare memcheck suppresses", sorted(set(bare["errors"]) - set(user["errors"])),
      ["free_not_heap", "free_twice"])
# What memcheck sees below poolscope: everything with valgrind=1; without, only what no pool serves
# (an invalid free of something that is no block, or of a block above the pool size).
def seen(who):
    size = bare["sizes"][who]
    return v == "1" or size is None or size > pool_size
want_leaks = {k: n for k, n in user["leaks"].items() if seen(k.split()[0])}
want_errors = {k: n for k, n in user["errors"].items() if seen(k)}
want_suppressed = sum(n[0] for k, n in bare["leaks"].items()
                      if k.split()[0] in suppressed_callers and seen(k.split()[0]))
pools = json.load(open(report))["pool"]
live = pools["pools_cached_at_exit"] + pools["pools_in_use_at_exit"]
check("the run's pools live at exit (nothing to check without one)", live > 0, True)
# What is neither the program's callers' nor a pool's (libstdc++'s start-up): as bare, of what memcheck
# sees (keyed by the size of a block).
check("records left that are not the program's callers'", adapted["other"],
      {k: n for k, n in user["other"].items() if v == "1" or int(k.split()[0]) > pool_size})
check("loss records left (by caller and kind: blocks, bytes)", adapted["leaks"], want_leaks)
check("invalid frees left", adapted["errors"], want_errors)
check("pool loss records left", adapted["pool_records"], 0)
check("blocks suppressed", adapted["suppressed"], want_suppressed + live)
# The file as written: what bare suppresses among what memcheck sees is reported.
missed = sorted(k.split()[0] for k in unadapted["leaks"] if k.split()[0] in suppressed_callers)
check("the file as written: suppressed callers it leaves reported",
      missed, sorted(c for c in suppressed_callers if seen(c)))
check("the file as written: invalid frees it leaves reported", sorted(unadapted["errors"]),
      sorted(c for c in ["free_not_heap", "free_twice"] if seen(c)))
if ok:
    print(f"ok: {label}: left as bare {sorted(want_leaks)} {sorted(want_errors)}, "
          f"{want_suppressed} blocks of the program's and {live} pools suppressed; "
          f"the file as written leaves {missed} reported")
sys.exit(0 if ok else 1)
PY
done

# ---- LeakSanitizer and heaptrack -------------------------------------------------------------------
"$poolscope" suppressions --adapt "$work/user.lsan" --format=lsan > "$work/adapted.lsan" 2> "$work/adapt.lsan.err"
[ ! -s "$work/adapt.lsan.err" ] || { echo "FAIL: --adapt said: $(cat "$work/adapt.lsan.err")"; fail=1; }
if [ "$(grep -v '^#' "$work/adapted.lsan")" != "$(grep -v '^#' "$work/user.lsan")" ]; then
  echo "FAIL: lsan: the adapted file's patterns are not the user's"; fail=1
fi
"$poolscope" suppressions --format=lsan "$work/any.json" > "$work/pools.lsan"
cat "$work/adapted.lsan" "$work/pools.lsan" > "$work/adapted+pools.lsan"
cat "$work/user.lsan" "$work/pools.lsan" > "$work/user+pools.lsan"
lsan() {  # lsan NAME SUPPRESSIONS [preload]
  if [ $# -ge 3 ]; then
    LSAN_OPTIONS="exitcode=0:suppressions=$2" LD_PRELOAD="$lib" \
      POOLSCOPE_OPTIONS="pool=1:pool_size=$pool_size:quiet=1:report=none" "$lsan_prog" 2> "$work/$1.log"
  else
    LSAN_OPTIONS="exitcode=0:suppressions=$2" "$lsan_prog" 2> "$work/$1.log"
  fi
  parse lsan "$work/$1.log" > "$work/$1.json"
}
lsan lsan.bare "$work/user.lsan"
lsan lsan.adapted "$work/adapted+pools.lsan" preload
lsan lsan.user "$work/user+pools.lsan" preload
lsan lsan.all /dev/null preload

ht() {  # ht NAME SUPPRESSIONS TRACE
  heaptrack_print --print-leaks=1 --disable-builtin-suppressions --print-suppressions=1 -n 100 -s 100 \
    --suppressions="$2" "$3" > "$work/$1.txt" 2>&1
  parse heaptrack "$work/$1.txt" > "$work/$1.json"
}
LD_PRELOAD="$ht_preload" DUMP_HEAPTRACK_OUTPUT="$work/ht.bare.raw" "$prog"
LD_PRELOAD="$lib:$ht_preload" DUMP_HEAPTRACK_OUTPUT="$work/ht.pre.raw" \
  POOLSCOPE_OPTIONS="pool=1:pool_size=$pool_size:quiet=1:report=none" "$prog"
for t in bare pre; do "$ht_interpret" < "$work/ht.$t.raw" 2> /dev/null | gzip > "$work/ht.$t.gz"; done
"$poolscope" suppressions --adapt "$work/user.lsan" --format=heaptrack > "$work/adapted.ht"
"$poolscope" suppressions --format=heaptrack "$work/any.json" > "$work/pools.ht"
cat "$work/adapted.ht" "$work/pools.ht" > "$work/adapted+pools.ht"
cat "$work/user.lsan" "$work/pools.ht" > "$work/user+pools.ht"
ht ht.bare "$work/user.lsan" "$work/ht.bare.gz"
ht ht.adapted "$work/adapted+pools.ht" "$work/ht.pre.gz"
ht ht.user "$work/user+pools.ht" "$work/ht.pre.gz"
ht ht.all /dev/null "$work/ht.pre.gz"

for tool in lsan ht; do
  "$PY" - "$tool" "$pool_size" "$work/bare.json" "$work/$tool.bare.json" "$work/$tool.adapted.json" \
    "$work/$tool.user.json" <<'PY' || fail=1
import json, sys
tool, pool_size = sys.argv[1], int(sys.argv[2])
sizes = json.load(open(sys.argv[3]))["sizes"]  # bare memcheck's: bytes a block, by caller
bare, adapted, unadapted = (json.load(open(p)) for p in sys.argv[4:7])
label = {"lsan": "LeakSanitizer", "ht": "heaptrack"}[tool]
ok = True
def check(what, got, want):
    global ok
    if got != want:
        print(f"FAIL: {label}: {what} is {got}, expected {want}")
        ok = False
seen = {c for c, size in sizes.items() if size is not None and size > pool_size}
check("the callers bare leaves reported", sorted(bare["leaks"]), ["inner_alloc", "kept_big", "kept_small"])
want = {c: n for c, n in bare["leaks"].items() if c in seen}
check("leaks left below poolscope", adapted["leaks"], want)
check("leaks left that are not the program's callers'", adapted["other"], [])
check("pool leaks left", adapted["pool_records"], 0)
# What the patterns of the callers that make no pool suppress (grow's first block comes from a pool
# made under grow, which heaptrack credits to the outermost pattern its stack matches, leak:grow).
for template in ["big_malloc", "aligned"]:
    check(f"what leak:{template} suppresses", adapted["used"].get(template), bare["used"].get(template))
check("the file as written: leaks left", unadapted["leaks"], adapted["leaks"])
check("the file as written: what it suppresses", unadapted["used"], adapted["used"])
if ok:
    print(f"ok: {label}: left as bare {sorted(want)}, the patterns unchanged suppress as bare")
sys.exit(0 if ok else 1)
PY
done

# A pattern for a function of libpoolscope.so on the program's leaks' stacks: --adapt warns about it,
# and it suppresses those leaks with poolscope preloaded, none bare.
"$PY" -c 'import json, sys
names = set()
for p in sys.argv[1:]:
    names.update(json.load(open(p))["poolscope"])
print("\n".join("leak:" + n for n in sorted(names)))' "$work/lsan.all.json" "$work/ht.all.json" > "$work/own.lsan"
if [ ! -s "$work/own.lsan" ]; then
  echo "FAIL: no function of libpoolscope.so on the program's leaks' stacks (nothing to check)"; fail=1
fi
"$poolscope" suppressions --adapt "$work/own.lsan" > /dev/null 2> "$work/own.err"
n=0
while IFS= read -r pattern; do
  n=$((n + 1))
  grep -qF "poolscope: $work/own.lsan:$n: warning: $pattern also matches poolscope's own frame" "$work/own.err" ||
    { echo "FAIL: no warning for line $n, $pattern: $(cat "$work/own.err")"; fail=1; }
done < "$work/own.lsan"
[ "$(wc -l < "$work/own.err")" -eq "$n" ] || { echo "FAIL: warnings: $(cat "$work/own.err")"; fail=1; }
lsan own.bare "$work/own.lsan"
lsan own.pre "$work/own.lsan" preload
"$PY" - "$work/own.bare.json" "$work/own.pre.json" "$work/own.lsan" <<'PY' || fail=1
import json, sys
bare, pre = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
ok = bare["used"] == {} and "kept_big" in bare["leaks"] and "kept_big" not in pre["leaks"] and pre["used"]
print(("ok" if ok else "FAIL") + f": patterns for poolscope's own frames ({open(sys.argv[3]).read().split()}): "
      f"bare suppress {bare['used']}, preloaded {pre['used']}, leaving {sorted(pre['leaks'])}")
sys.exit(0 if ok else 1)
PY

if [ "$fail" -ne 0 ]; then
  [ -n "${TEST_UNDECLARED_OUTPUTS_DIR:-}" ] && cp "$work"/*.log "$work"/*.txt "$work"/*.supp "$work"/*.lsan "$TEST_UNDECLARED_OUTPUTS_DIR"/ || true
  exit 1
fi
echo PASS
