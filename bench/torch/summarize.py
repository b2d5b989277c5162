#!/usr/bin/env python3
"""Tables for a bench/torch/run.sh results directory, in Markdown.

    summarize.py DIR

DDP: per model, each configuration's median samples/s (over its windows), the spread of the
windows, and its ratio to gloo; then rank 0's step in each window (forward, backward with the
all-reduces DDP waits for, optimizer, and the time the cohort backend's all-reduces ran).
All-reduce: per size, cohort-bench's algbw (the Reduction Server unless run.sh's --allreduce-algo
said otherwise), the cohort backend's (dist.all_reduce) with its defaults and its overhead (1 -
backend algbw / cohort-bench algbw), rank 0's fastest, median and slowest call, of cohort-bench
and of the backend (a mean far above the median is a few stalled calls, not a cost on every call),
the overhead of the backend's median call over cohort-bench's, then each other run present: whole
calls (COHORT_TORCH_OVERLAP=0), the agreement all-gather (COHORT_TORCH_CHECK_CALLS=1), torch's gloo
backend, with their algbw and overhead against cohort-bench.
Network: what each run added to the emulated cluster's TCP counters (retransmissions, RTO timeouts,
...) and its links' drops (run.sh's *.net0 and *.net1).
"""
import glob
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from bench_results import human_size, json_rows  # noqa: E402


CONFIGS = ("gloo", "cohort", "cohort-serial", "cohort-bf16", "cohort-bf16-serial")


def ddp_tables(out):
    summaries, windows = {}, {}
    for path in sorted(glob.glob(os.path.join(out, "ddp-*.jsonl"))):
        for row in json_rows(path):
            key = (row["model"], row["label"].split("-", 2)[-1])
            if row.get("summary"):
                summaries[key] = row
            elif "window" in row:
                windows.setdefault(key, []).append(row)
    if not summaries:
        return
    for model in sorted({m for m, _ in summaries}):
        first = next(r for (m, _), r in summaries.items() if m == model)
        print(f"### DDP, {model} model ({first['parameters'] / 1e6:.1f} M parameters, "
              f"{first['gradient_bytes'] / 2**20:.0f} MiB of float32 gradient), {first['world']} workers, "
              f"batch {first['batch']} per worker, {first['windows']} windows of {first['steps']} steps\n")
        print("| configuration | samples/s (median) | windows min-max | x gloo |")
        print("|---|---:|---:|---:|")
        gloo = summaries.get((model, "gloo"))
        for config in CONFIGS:
            r = summaries.get((model, config))
            if r is None:
                continue
            ratio = f"{r['samples_per_s_median'] / gloo['samples_per_s_median']:.2f}x" if gloo else "-"
            print(f"| {config} | {r['samples_per_s_median']:.2f} | {min(r['samples_per_s']):.2f}-"
                  f"{max(r['samples_per_s']):.2f} | {ratio} |")
        print()
        phase_table(model, windows)


def phase_table(model, windows):
    """Rank 0's step, in ms, per window from the fastest to the slowest: forward, backward (with the
    all-reduces DDP waits for), optimizer, the time an all-reduce ran (cohort's flight recorder),
    the window's slowest all-reduce (ms, and its MiB), the time its all-reduces took beyond the
    median call of their size (stalled calls; ms a step), the CPU time of rank 0's process (all its
    threads) and the share of the machine's CPUs busy. Rows from before these were recorded have
    none: no table (or "-")."""
    rows = [(c, w) for c in CONFIGS for w in windows.get((model, c), []) if "forward_s" in w]
    if not rows:
        return
    print(f"Where rank 0's steps went ({model} model), ms a step, each window from the fastest:\n")
    print("| configuration | samples/s | step | forward | backward | optimizer | all-reduce running "
          "| slowest all-reduce | beyond median calls | rank 0 CPU | machine busy |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for config, w in sorted(rows, key=lambda cw: (CONFIGS.index(cw[0]), -cw[1]["samples_per_s"])):
        per_step = {k: 1e3 * w[k] / w["steps"] for k in ("seconds", "forward_s", "backward_s", "optimizer_s")}
        busy = f"{1e3 * w['allreduce_busy_s'] / w['steps']:.0f}" if "allreduce_busy_s" in w else "-"
        slowest = (f"{1e3 * w['allreduce_slowest_s']:.0f} ({w['allreduce_slowest_bytes'] / 2**20:.0f} MiB)"
                   if "allreduce_slowest_s" in w else "-")
        beyond = (f"{1e3 * w['allreduce_beyond_median_s'] / w['steps']:.0f}"
                  if "allreduce_beyond_median_s" in w else "-")
        cpu = f"{1e3 * w['process_cpu_s'] / w['steps']:.0f}" if "process_cpu_s" in w else "-"
        machine = f"{100 * w['machine_busy']:.0f}%" if "machine_busy" in w else "-"
        print(f"| {config} | {w['samples_per_s']:.2f} | {per_step['seconds']:.0f} | {per_step['forward_s']:.0f} | "
              f"{per_step['backward_s']:.0f} | {per_step['optimizer_s']:.0f} | {busy} | {slowest} | {beyond} | "
              f"{cpu} | {machine} |")
    print()


NET_KEYS = ("RetransSegs", "TCPTimeouts", "TCPLossProbes", "TCPDSACKRecv", "TCPToZeroWindowAdv", "egress_drops",
            "ingress_drops", "DelayedACKs")


def net_counters(path):
    """{key: sum over the cluster's hosts} of a `cluster.sh counters` file; None when absent."""
    if not os.path.exists(path):
        return None
    sums = {}
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) == 3 and parts[2].isdigit():
                sums[parts[1]] = sums.get(parts[1], 0) + int(parts[2])
    return sums


def net_table(out):
    """What each run added to the cluster's counters of lost time: TCP retransmitted segments, RTO
    timeouts (each one stalls a flow for 200 ms or more), tail loss probes, DSACKs received (a
    retransmission that was not needed), zero windows advertised (a receiver that did not read in
    time), the links' drops, and delayed ACKs; summed over every host. Runs of `--local` have none:
    no table."""
    rows = []
    for before in sorted(glob.glob(os.path.join(out, "*.net0"))):
        label = os.path.basename(before)[:-len(".net0")]
        a, b = net_counters(before), net_counters(before[:-1] + "1")
        if a is None or b is None:
            continue
        rows.append((label, {k: b.get(k, 0) - a.get(k, 0) for k in NET_KEYS}))
    if not rows:
        return
    print("### The emulated network during each run (every host's counters, summed)\n")
    print("| run | " + " | ".join(NET_KEYS) + " |")
    print("|---|" + "---:|" * len(NET_KEYS))
    for label, d in rows:
        print(f"| {label} | " + " | ".join(str(d[k]) for k in NET_KEYS) + " |")
    print()


# The all-reduce alone: run.sh's --allreduce-configs, in this order.
ALLREDUCE_CONFIGS = ("cohort", "cohort-serial", "cohort-check", "gloo")


def allreduce_table(out):
    series = {}
    for name in ["allreduce-cohort-bench"] + [f"allreduce-torch-{c}" for c in ALLREDUCE_CONFIGS]:
        path = os.path.join(out, name + ".jsonl")
        if os.path.exists(path):
            series[name] = {int(r["size"]): r for r in json_rows(path) if "size" in r}
    bench = series.pop("allreduce-cohort-bench", {})
    torch_on = series.pop("allreduce-torch-cohort", {})
    others = [(name[len("allreduce-torch-"):], rows) for name, rows in series.items()]
    sizes = sorted(set(bench) | set(torch_on) | {s for _, rows in others for s in rows})
    if not sizes:
        return
    algo = next((r["algo"] for rows in (bench, torch_on) for r in rows.values() if "algo" in r), "?")
    print(f"### All-reduce alone: the cohort backend against cohort-bench ({algo}, float32)\n")
    print("| size | cohort-bench algbw | its calls, ms: min/median/max | backend algbw | overhead "
          "| backend calls, ms: min/median/max | overhead, medians | "
          + "".join(f"{config} algbw | overhead | " for config, _ in others) + "wrong |")
    print("|---:|---:|---:|---:|---:|---:|---:|" + "---:|---:|" * len(others) + "---:|")

    def cell(r):
        return f"{r['algbw_GBps']:.4f}" if r else "-"

    def calls(r):  # rank 0's calls one by one (rows from before they were recorded have none)
        if not r or "call_us_median" not in r:
            return "-"
        return "/".join(f"{r[k] / 1e3:.2f}" for k in ("call_us_min", "call_us_median", "call_us_max"))

    def overhead(r):
        b = bench.get(size)
        return f"{100 * (1 - r['algbw_GBps'] / b['algbw_GBps']):.1f}%" if r and b else "-"

    def median_overhead(r):  # the typical call's, which a few stalled calls on either side leave alone
        b = bench.get(size)
        if not r or not b or "call_us_median" not in r or "call_us_median" not in b:
            return "-"
        return f"{round(100 * (r['call_us_median'] / b['call_us_median'] - 1), 1) + 0.0:.1f}%"

    for size in sizes:
        on, b = torch_on.get(size), bench.get(size)
        rest = [rows.get(size) for _, rows in others]
        wrong = sum(int(r.get("wrong", 0)) for r in [on, b] + rest if r)
        print(f"| {human_size(size)} | {cell(b)} | {calls(b)} | {cell(on)} | {overhead(on)} | {calls(on)} "
              f"| {median_overhead(on)} | " + "".join(f"{cell(r)} | {overhead(r)} | " for r in rest)
              + f"{wrong} |")
    print()


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    out = sys.argv[1]
    ddp_tables(out)
    allreduce_table(out)
    net_table(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
