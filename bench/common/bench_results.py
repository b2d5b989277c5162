"""What the benchmarks' result scripts share: the --json lines of a results file, and sizes
written as the size arguments take them (64M, 4K).

Used by bench/peers/join_results.py, bench/peers/median_runs.py and bench/torch/summarize.py,
which put this folder on sys.path.
"""
import json


def json_rows(path):
    """Yields the JSON object of every line of `path` that holds one; other lines (text tables,
    logs, a line cut short) are skipped. Opening the file raises OSError as open() does."""
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line.startswith("{"):
                continue
            try:
                yield json.loads(line)
            except json.JSONDecodeError:
                pass


def human_size(n):
    """64M for 64 MiB, 4K for 4 KiB; a size that is no whole number of K, M or G in bytes."""
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift}{unit}"
    return str(n)
