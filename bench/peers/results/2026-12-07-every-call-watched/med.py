import json, glob, statistics, sys
res = {}
for f in glob.glob("*.json"):
    v = f.split("-")[0]
    for line in open(f):
        d = json.loads(line)
        res.setdefault((d["size"], v), []).append((d["time_us"], d["wrong"]))
for size in sorted({s for s, _ in res}):
    b = [t for t, _ in res[(size, "base")]]; n = [t for t, _ in res[(size, "new")]]
    wrong = sum(w for _, w in res[(size, "base")] + res[(size, "new")])
    print(f"{size:>6} base {statistics.median(b):7.2f} us  new {statistics.median(n):7.2f} us  new/base {statistics.median(n)/statistics.median(b):.3f}  (runs {len(b)},{len(n)}; base {min(b):.1f}-{max(b):.1f}, new {min(n):.1f}-{max(n):.1f}) wrong {wrong}")
