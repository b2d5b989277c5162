#!/usr/bin/env python3
"""Joins the --json lines of cohort-bench, cohort-bench-mpi and cohort-bench-gloo by size.

Each input file holds one JSON object per line with at least "impl", "size", "time_us",
"algbw_GBps", "busbw_GBps" and "wrong" (nccl-tests' columns); other lines are ignored. When an
implementation appears more than once for a size (several MPI algorithms, several files), the
fastest row is kept and its "algo" is named in the table.

Output: a text table (and, with --markdown FILE, the same as a Markdown table) with each
implementation's algbw, then the ratios of each Cohort implementation to MPI and Gloo and, when
--link-bps is given (the emulated cluster), algbw / measured link rate.
"""
import argparse
import math
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from bench_results import human_size, json_rows  # noqa: E402

COHORT_PREFIX = "cohort"


def load(paths):
    best = {}  # (impl, size) -> row
    for path in paths:
        try:
            rows = list(json_rows(path))
        except OSError as e:
            print(f"join_results: skipping {path}: {e}", file=sys.stderr)
            continue
        for row in rows:
            if "impl" not in row or "size" not in row or "time_us" not in row:
                continue
            key = (row["impl"], int(row["size"]))
            old = best.get(key)
            if old is None or float(row["time_us"]) < float(old["time_us"]):
                if old is not None and old.get("wrong"):
                    row = dict(row, wrong=old["wrong"])  # never hide a wrong result
                best[key] = row
    return best


def order(impls):
    def rank(name):
        if name == "cohort-rs":
            return (0, name)
        if name.startswith(COHORT_PREFIX):
            return (1, name)
        return ({"mpi": 2, "gloo": 3}.get(name, 4), name)
    return sorted(impls, key=rank)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+")
    parser.add_argument("--link-bps", type=float, default=0,
                        help="measured link rate in bits/s (adds algbw/link columns)")
    parser.add_argument("--markdown", help="also write the table as Markdown to this file")
    parser.add_argument("--title", default="")
    args = parser.parse_args()

    best = load(args.files)
    if not best:
        print("join_results: no result rows found", file=sys.stderr)
        return 1
    impls = order({impl for impl, _ in best})
    sizes = sorted({size for _, size in best})
    ours = [i for i in impls if i.startswith(COHORT_PREFIX)]
    peers = [i for i in impls if i in ("mpi", "gloo")]
    link_gbps = args.link_bps / 8e9 if args.link_bps else 0

    header = ["size"] + [f"{i} algbw" for i in impls]
    for o in ours:
        header += [f"{o}/{p}" for p in peers]
        if link_gbps:
            header.append(f"{o}/link")
    for p in peers:
        if link_gbps:
            header.append(f"{p}/link")
    header.append("algo (mpi, gloo)")
    header.append("wrong")

    rows = []
    for size in sizes:
        def algbw(impl):
            row = best.get((impl, size))
            return float(row["algbw_GBps"]) if row else math.nan

        cells = [human_size(size)] + [f"{algbw(i):.4f}" for i in impls]
        for o in ours:
            for p in peers:
                a, b = algbw(o), algbw(p)
                cells.append(f"{a / b:.2f}x" if b > 0 and not math.isnan(a + b) else "-")
            if link_gbps:
                a = algbw(o)
                cells.append(f"{100 * a / link_gbps:.1f}%" if not math.isnan(a) else "-")
        for p in peers:
            if link_gbps:
                a = algbw(p)
                cells.append(f"{100 * a / link_gbps:.1f}%" if not math.isnan(a) else "-")
        algos = [best[(p, size)].get("algo", "") if (p, size) in best else "-" for p in peers]
        cells.append(",".join(algos) if algos else "-")
        wrong = []
        for i in impls:
            row = best.get((i, size))
            if row is not None and row.get("wrong") not in (None, 0):
                wrong.append(f"{i}:{row['wrong']}")
        cells.append(" ".join(wrong) if wrong else ("0" if any(
            best.get((i, size), {}).get("wrong") == 0 for i in impls) else "n/a"))
        rows.append(cells)

    widths = [max(len(header[c]), *(len(r[c]) for r in rows)) for c in range(len(header))]
    out = []
    if args.title:
        out.append(f"# {args.title}")
    if link_gbps:
        out.append(f"# link rate (measured): {args.link_bps / 1e6:.0f} Mbit/s = {link_gbps:.4f} GB/s")
    out.append("# algbw in GB/s (1e9 bytes/s); ratios compare algbw; wrong = elements off the exact sum")
    out.append("  ".join(h.rjust(w) for h, w in zip(header, widths)))
    for r in rows:
        out.append("  ".join(c.rjust(w) for c, w in zip(r, widths)))
    print("\n".join(out))

    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write("| " + " | ".join(header) + " |\n")
            f.write("|" + "|".join("---:" for _ in header) + "|\n")
            for r in rows:
                f.write("| " + " | ".join(r) + " |\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
