#!/usr/bin/env python3
"""Paired ratios from a matmul_interleaved result: per repetition (the variants ran back to back),
time(A) / time(B); prints the median and quartiles of those ratios per case. Ratios of adjacent
samples cancel most of the drift that other processes cause on a shared machine, where medians of
separate columns do not.

  bench/interleaved_ratios.py bench/results/matmul_interleaved-<time>.json q4_0/q4_0_rg q4_k/q4_k_rg
"""
import json
import statistics
import sys


def main():
    data = json.load(open(sys.argv[1]))
    pairs = [p.split("/") for p in sys.argv[2:]]
    for case in data["cases"]:
        by = {t["dtype"]: t["seconds"] for t in case["types"]}
        cells = []
        for a, b in pairs:
            if a not in by or b not in by:
                continue
            r = sorted(x / y for x, y in zip(by[a], by[b]))
            q = statistics.quantiles(r, n=4) if len(r) >= 4 else [r[0], statistics.median(r), r[-1]]
            cells.append(f"{a}/{b} x{statistics.median(r):.2f} [{q[0]:.2f}, {q[2]:.2f}]")
        print(f"{case['name']:28s} " + "  ".join(cells))


if __name__ == "__main__":
    main()
