#!/usr/bin/env python3
"""Medians over repeated bench/compare_allreduce.sh runs.

    python3 bench/peers/median_runs.py [--link-bps BPS] RUN_DIR [RUN_DIR ...]

Each RUN_DIR holds the *.jsonl files of one compare_allreduce.sh run (cohort-rs, cohort-ring,
mpi-*, gloo; the best MPI variant per size is kept, as join_results.py does). For every size it
prints the median algbw (GB/s) of each implementation over the runs and the median of the
per-run ratios (ours / peer measured in the same run), plus the min..max of those ratios, as a
Markdown table. link_bps.txt in a run dir (setting b) adds algbw / link columns.
"""
import glob
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from bench_results import human_size, json_rows  # noqa: E402


def load_run(d):
    best = {}
    for path in glob.glob(os.path.join(d, "*.jsonl")):
        name = os.path.basename(path)[:-6]
        impl = "mpi" if name.startswith("mpi-") else name
        for row in json_rows(path):
            if row.get("wrong") not in (0, None):
                print(f"warning: {d} {impl} size {row['size']} wrong={row['wrong']}", file=sys.stderr)
            key = (impl, int(row["size"]))
            if key not in best or row["algbw_GBps"] > best[key]:
                best[key] = row["algbw_GBps"]
    link = None
    lp = os.path.join(d, "link_bps.txt")
    if os.path.exists(lp):
        link = int(open(lp).read().strip()) / 8e9
    return best, link


def main(argv):
    dirs = [a for a in argv if not a.startswith("--")]
    runs = [load_run(d) for d in dirs]
    ours = [i for i in ("cohort-rs", "cohort-ring", "cohort-hd", "cohort-rd", "cohort-shm", "cohort-hier", "cohort-auto") if any((i, s) in r for r, _ in runs for (_, s) in r)]
    peers = [p for p in ("mpi", "gloo") if any(k[0] == p for r, _ in runs for k in r)]
    sizes = sorted({s for r, _ in runs for (_, s) in r})
    has_link = all(l is not None for _, l in runs)
    head = ["size"] + [f"{i} algbw" for i in ours + peers]
    head += [f"{o}/{p}" for o in ours for p in peers]
    if has_link:
        head += [f"{i}/link" for i in ours + peers]
    print(f"medians over {len(runs)} runs: " + ", ".join(dirs))
    print("| " + " | ".join(head) + " |")
    print("|" + "---:|" * len(head))
    for s in sizes:
        row = [human_size(s)]
        for i in ours + peers:
            v = [r[(i, s)] for r, _ in runs if (i, s) in r]
            row.append(f"{statistics.median(v):.4f}" if v else "-")
        for o in ours:
            for p in peers:
                v = [r[(o, s)] / r[(p, s)] for r, _ in runs if (o, s) in r and (p, s) in r and r[(p, s)] > 0]
                row.append(f"{statistics.median(v):.2f}x ({min(v):.2f}-{max(v):.2f})" if v else "-")
        if has_link:
            for i in ours + peers:
                v = [r[(i, s)] / l for r, l in runs if (i, s) in r]
                row.append(f"{100 * statistics.median(v):.1f}%" if v else "-")
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main(sys.argv[1:])
