"""A small python3 workload for the integration tests: dicts, strings, lists, json.

Run with PYTHONMALLOC=malloc so that every Python object goes through malloc (and so through
poolscope). Deterministic output; exits with status 3 so that the tests see an exit status carried
through unchanged.
"""
import json
import sys


def main():
    table = {}
    for i in range(20000):
        key = "k%05d" % i
        table[key] = {"n": i, "sq": i * i, "name": key.upper(), "tags": [key[:3], str(i % 7)]}
    words = []
    for i in range(20000):
        words.append(("w%d" % (i % 997)) * (1 + i % 5))
    text = " ".join(words)
    counts = {}
    for w in text.split():
        counts[w] = counts.get(w, 0) + 1
    top = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:5]
    blob = json.dumps(table, sort_keys=True)
    back = json.loads(blob)
    total = sum(v["sq"] % 1000 for v in back.values())
    lists = [[j for j in range(i % 50)] for i in range(5000)]
    flat = sum(len(x) for x in lists)
    s = "".join(chr(97 + (i % 26)) for i in range(50000))
    parts = s.replace("abc", "-").split("-")
    print("keys=%d total=%d blob=%d flat=%d parts=%d" % (len(back), total, len(blob), flat, len(parts)))
    print("top=%s" % json.dumps(top))
    return 3


if __name__ == "__main__":
    sys.exit(main())
