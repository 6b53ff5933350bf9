#!/usr/bin/env python3
"""Per-round ratios (B / A) of bench/ab_bench_binaries.sh result folders: each run's p50 tok/s."""
import glob, json, os, statistics, sys

for root in sys.argv[1:]:
    runs = {}
    for f in glob.glob(os.path.join(root, "*", "*.json")):
        r, v = os.path.basename(os.path.dirname(f)).split("-")
        m = json.load(open(f))["metrics"]
        runs[(int(r), v)] = {k: m[k]["summary"]["p50"] for k in m if k.endswith("tokens_per_second")}
    keys = sorted(runs[min(runs)].keys())
    print(root)
    for k in keys:
        rows = [(r, runs[(r, "A")][k], runs[(r, "B")][k]) for r in sorted({r for r, _ in runs})]
        ratios = [b / a for _, a, b in rows]
        print(f"  {k:34s} A {statistics.median(a for _, a, _ in rows):7.1f}  B "
              f"{statistics.median(b for _, _, b in rows):7.1f}  B/A per round "
              + " ".join(f"{x:.2f}" for x in ratios) + f"  median x{statistics.median(ratios):.2f}")
