import json, statistics, sys
def load(d, name):
    out = {}
    for line in open(f"{d}/{name}.jsonl"):
        line = line.strip()
        if line.startswith("{"):
            r = json.loads(line)
            if "size" in r: out[int(r["size"])] = r
    return out
pre = sys.argv[1]; n = int(sys.argv[2]) if len(sys.argv) > 2 else 3
rows = {}
for i in range(1, n + 1):
    for v in ("before", "after"):
        d = f"{pre}-{v}-{i}"
        rows[(v, i)] = (load(d, "allreduce-torch-cohort"), load(d, "allreduce-cohort-bench"))
sizes = sorted(rows[("after", 1)][0])
print("| size | backend before algbw | backend after algbw | after/before (per pair) | median call before/after, us | cohort-bench algbw | backend after / cohort-bench |")
print("|---:|---:|---:|---:|---:|---:|---:|")
for s in sizes:
    b = [rows[("before", i)][0][s]["algbw_GBps"] for i in range(1, n + 1)]
    a = [rows[("after", i)][0][s]["algbw_GBps"] for i in range(1, n + 1)]
    cb = [rows[(v, i)][1][s]["algbw_GBps"] for i in range(1, n + 1) for v in ("before", "after")]
    mb = statistics.median(rows[("before", i)][0][s]["call_us_median"] for i in range(1, n + 1))
    ma = statistics.median(rows[("after", i)][0][s]["call_us_median"] for i in range(1, n + 1))
    r = [x / y for x, y in zip(a, b)]
    print(f"| {s // 1024}K | {statistics.median(b):.4f} | {statistics.median(a):.4f} | {statistics.median(r):.2f}x ({min(r):.2f}-{max(r):.2f}) | {mb:.0f} / {ma:.0f} | {statistics.median(cb):.4f} | {statistics.median(a) / statistics.median(cb):.2f} |")
