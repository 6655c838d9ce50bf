"""A fixed python3 workload for bench/run_passthrough.sh (run with PYTHONMALLOC=malloc):
dict, string, list and json churn, about a second bare on these machines.
Optional argument: a scale factor for the amount of work (default 1.0; bench/run_all.sh uses 0.25,
about half a second bare)."""
import json
import sys

SCALE = float(sys.argv[1]) if len(sys.argv) > 1 else 1.0
N = max(100, int(40000 * SCALE))
M = max(100, int(8000 * SCALE))


def main():
    total = 0
    for rnd in range(3):
        table = {}
        for i in range(N):
            key = "k%06d" % (i + rnd)
            table[key] = {"n": i, "name": key.upper(), "tags": [key[:3], str(i % 7)]}
        blob = json.dumps(table)
        back = json.loads(blob)
        words = " ".join(("w%d" % (i % 997)) * (1 + i % 5) for i in range(N)).split()
        counts = {}
        for w in words:
            counts[w] = counts.get(w, 0) + 1
        total += len(back) + len(counts) + sum(len(x) for x in ([j for j in range(i % 40)] for i in range(M)))
    print(total)


main()
