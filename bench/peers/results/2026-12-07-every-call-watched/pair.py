import json, statistics
def load(f): return {json.loads(l)["size"]: json.loads(l)["time_us"] for l in open(f)}
for size in [1024,2048,4096,8192,16384,32768,65536]:
    r = []
    for i in range(1, 17):
        b, n = load(f"base-{i}.json"), load(f"new-{i}.json")
        r.append(n[size] / b[size])
    r.sort()
    print(f"{size:>6} new/base by pair: median {statistics.median(r):.3f}, quartiles {r[4]:.3f}-{r[11]:.3f}, range {r[0]:.2f}-{r[-1]:.2f}")
