"""A fixed python3 workload for bench/run_passthrough.sh (run with PYTHONMALLOC=malloc):
dict, string, list and json churn, about a second bare on these machines."""
import json


def main():
    total = 0
    for rnd in range(3):
        table = {}
        for i in range(40000):
            key = "k%06d" % (i + rnd)
            table[key] = {"n": i, "name": key.upper(), "tags": [key[:3], str(i % 7)]}
        blob = json.dumps(table)
        back = json.loads(blob)
        words = " ".join(("w%d" % (i % 997)) * (1 + i % 5) for i in range(40000)).split()
        counts = {}
        for w in words:
            counts[w] = counts.get(w, 0) + 1
        total += len(back) + len(counts) + sum(len(x) for x in ([j for j in range(i % 40)] for i in range(8000)))
    print(total)


main()
