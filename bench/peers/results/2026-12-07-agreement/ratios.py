import json, glob, sys, statistics
def load(d):
    out = {}
    for f in glob.glob(d + "/cohort*.jsonl"):
        for line in open(f):
            line=line.strip()
            if not line.startswith("{"): continue
            r = json.loads(line)
            if "size" in r: out[(r.get("algo"), int(r["size"]))] = r["algbw_GBps"]
    return out
pre, post = sys.argv[1], sys.argv[2]
runs = [(load(f"{pre}-{i}"), load(f"{post}-{i}")) for i in (1,2,3)]
keys = sorted(runs[0][0])
for k in keys:
    rs = [a[k] and b[k] / a[k] for a, b in runs if k in a and k in b]
    print(k, " ".join(f"{r:.2f}" for r in rs), "median", f"{statistics.median(rs):.2f}")
