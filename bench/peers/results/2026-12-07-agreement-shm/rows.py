import sys, json
for path in sys.argv[1:]:
    rows = [json.loads(l) for l in open(path) if l.startswith("{")]
    print(path.split("/")[3], " ".join("%dK:%.4f" % (r["size"] // 1024, r["algbw_GBps"]) for r in rows if "size" in r))
