"""A python3 workload that allocates steadily for a few seconds: the process `poolscope attach`
attaches to mid-run in the tests. Run with PYTHONMALLOC=malloc (every object through malloc).
Deterministic output (ROUNDS rounds, the first argument, default 60); exits with status 3.
With --until-attached it then goes on allocating, its output unchanged, until libpoolscope is loaded
(60 s at most) and for 3 s and 10 rounds after: an attach that takes longer than the rounds (a
loaded machine) still finds the process running, and counts its allocations.
"""
import json
import sys
import time


def round_of(r):
    table = {}
    for i in range(4000):
        key = "k%05d-%d" % (i, r)
        table[key] = {"n": i, "sq": i * i + r, "name": key.upper(), "tags": [key[:3], str(i % 7)]}
    blob = json.dumps(table, sort_keys=True)
    back = json.loads(blob)
    words = " ".join(("w%d" % (i % 97)) * (1 + (i + r) % 5) for i in range(4000)).split()
    counts = {}
    for w in words:
        counts[w] = counts.get(w, 0) + 1
    return sum(v["sq"] % 1000 for v in back.values()) + len(blob) + max(counts.values())


def poolscope_loaded():
    with open("/proc/self/maps") as maps:
        return "libpoolscope" in maps.read()


def main():
    args = [a for a in sys.argv[1:] if a != "--until-attached"]
    rounds = int(args[0]) if args else 60
    keep = []
    total = 0
    for r in range(rounds):
        total = (total * 31 + round_of(r)) % 1000000007
        keep.append(bytes(r % 251 for _ in range(1000)))
        if len(keep) > 20:
            keep.pop(0)
    if "--until-attached" in sys.argv[1:]:
        give_up = time.monotonic() + 60
        while not poolscope_loaded() and time.monotonic() < give_up:
            round_of(0)
        until, extra = time.monotonic() + 3, 0
        while extra < 10 or time.monotonic() < until:
            round_of(extra)
            extra += 1
    print("rounds", rounds, "total", total, "kept", sum(len(k) for k in keep))
    sys.exit(3)


if __name__ == "__main__":
    main()
