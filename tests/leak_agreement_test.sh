#!/bin/bash
# A leak verdict a CI can gate on: real programs, preloaded with the defaults, ten runs each, give the
# same four classes every run (ASLR moves every mapping between runs), and those classes are
# memcheck's, block for block (--leak-check=full --leak-check-heuristics=none, no freeres): python3
# with its own allocator and with PYTHONMALLOC=malloc on a short json script, sqlite3, git and ls.
# One block is counted as still reachable on both sides whatever its class: the dynamic loader's table
# of loaded objects (_dl_find_object_update) is aligned to 64 bytes inside its allocation and reached
# only through that aligned address, so its class (possibly lost, or still reachable when the
# allocation happens to start on the boundary) follows the allocator's alignment, which differs
# between glibc's and memcheck's and with the heap's history (a path's length, python3's hash seed).
# The locale is set for both sides (python3, which runs memcheck here, would otherwise set
# LC_CTYPE for memcheck's run alone).
# Args: LIB MEMCHECK_SUMMARY
set -euo pipefail
lib=$(readlink -f "$1"); summary=$(readlink -f "$2")
command -v valgrind > /dev/null || { echo "FAIL: valgrind is not installed"; exit 1; }
work=${TEST_TMPDIR:-$(mktemp -d)}/agreement
mkdir -p "$work"
runs=${AGREEMENT_RUNS:-10}
cat > "$work/j.py" <<'PY'
import json
d = {"a": [1, 2, 3], "b": {"c": "x" * 100}}
for i in range(200):
    s = json.dumps(d)
    d2 = json.loads(s)
print(len(s))
PY
printf 'create table t(a, b); insert into t values (1, 2); select * from t;\n' > "$work/in.sql"
export LC_ALL=C.UTF-8
fail=0
# agree NAME VAR=VALUE|- CMD...
agree() {
  local name=$1 var=$2
  shift 2
  local -a env_set=()
  [ "$var" = - ] || env_set=("$var")
  env "${env_set[@]}" /usr/bin/python3 "$summary" --as-reachable _dl_find_object_update -- "$@" < "$work/in.sql" \
    > "$work/$name.memcheck.json" 2> /dev/null
  rm -rf "$work/$name"
  mkdir -p "$work/$name"
  for i in $(seq 1 "$runs"); do
    env "${env_set[@]}" LD_PRELOAD="$lib" POOLSCOPE_OPTIONS="quiet=1:report=$work/$name/r$i.%p.json" "$@" \
      < "$work/in.sql" > /dev/null 2>&1
  done
  /usr/bin/python3 - "$name" "$work/$name.memcheck.json" "$work/$name" "$runs" <<'PY' || fail=1
import glob, json, sys
name, mc, folder, runs = sys.argv[1], json.load(open(sys.argv[2])), sys.argv[3], int(sys.argv[4])
kinds = ["definitely_lost", "indirectly_lost", "possibly_lost", "still_reachable"]
want = [mc[k]["blocks"] for k in kinds]
reports = sorted(glob.glob(f"{folder}/r*.json"))
bad = []
if len(reports) != runs:
    bad.append(f"{len(reports)} reports for {runs} runs")
for path in reports:
    report = json.load(open(path))
    r = report["reachability"]
    got = [r[k]["blocks"] for k in kinds] if r.get("scanned") else None
    for g in report["leaks"] if got is not None else []:
        if g["kind"] == "possibly_lost" and any(f.get("function") == "_dl_find_object_update" for f in g["stack"]):
            got[2] -= g["blocks"]
            got[3] += g["blocks"]
    if got != want:
        bad.append(f"{path.rsplit('/', 1)[1]}: {got}")
for b in bad:
    print(f"FAIL: {name}: {b}; memcheck (definite, indirect, possible, reachable): {want}")
if not bad:
    print(f"ok: {name}: {runs} runs, every one {want}, as memcheck")
sys.exit(1 if bad else 0)
PY
}
agree python3 - /usr/bin/python3 "$work/j.py"
agree python3_malloc PYTHONMALLOC=malloc /usr/bin/python3 "$work/j.py"
agree sqlite3 - /usr/bin/sqlite3 :memory:
agree git - /usr/bin/git --version
agree ls - /usr/bin/ls -la /usr
[ "$fail" -eq 0 ] || exit 1
echo PASS
