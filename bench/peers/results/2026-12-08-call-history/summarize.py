import json, glob, statistics as st, sys
def load(kind, w, i):
    out = {}
    for line in open(f"/tmp/ab/{kind}-{w}-{i}.json"):
        line=line.strip()
        if not line.startswith("{"): continue
        d=json.loads(line); out[d["size"]] = d
    return out
for kind in ["rd","sm","rs"]:
    print("==", kind)
    runs = {w: [load(kind,w,i) for i in range(1,21)] for w in ["before","after","aa"]}
    wrong = sum(d["wrong"] for w in runs for r in runs[w] for d in r.values())
    sizes = sorted(runs["before"][0])
    print("wrong:", wrong)
    for s in sizes:
        b=[r[s]["time_us"] for r in runs["before"]]; a=[r[s]["time_us"] for r in runs["after"]]; c=[r[s]["time_us"] for r in runs["aa"]]
        ratio=sorted(x/y for x,y in zip(a,b)); aa=sorted(x/y for x,y in zip(c,a))
        q=lambda v:(v[len(v)//4], v[(3*len(v))//4])
        print(f"| {s} | {st.median(b):.2f} | {st.median(a):.2f} | {st.median(ratio):.2f}x ({q(ratio)[0]:.2f}-{q(ratio)[1]:.2f}) | {st.median(aa):.2f}x ({q(aa)[0]:.2f}-{q(aa)[1]:.2f}) |")
