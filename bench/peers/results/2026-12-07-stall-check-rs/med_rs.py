import json, sys, glob, statistics
runs = {}
for v in ("before", "after"):
    for d in sorted(glob.glob(f"/tmp/stall/rs-{v}-*")):
        if d.endswith(".log") or not __import__("os").path.exists(f"{d}/cohort-auto.jsonl"): continue
        i = d.rsplit("-", 1)[1]
        for line in open(f"{d}/cohort-auto.jsonl"):
            r = json.loads(line)
            runs.setdefault(r["size"], {}).setdefault(v, {})[i] = (r["algbw_GBps"], r["call_us_median"])
print("size | algbw before (median) | after | after/before per pair (median, range) | median call us before / after")
for size in sorted(runs):
    b, a = runs[size]["before"], runs[size]["after"]
    pairs = sorted(set(b) & set(a))
    ratios = [a[i][0] / b[i][0] for i in pairs]
    print(size, f"{statistics.median(x[0] for x in b.values()):.4f}", f"{statistics.median(x[0] for x in a.values()):.4f}",
          f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f})",
          f"{statistics.median(x[1] for x in b.values()):.1f} / {statistics.median(x[1] for x in a.values()):.1f}", len(pairs))
