#!/usr/bin/env python3
"""Speed ratios of encoder_bench runs of several variants that alternated in one session (as
step_bench_ratios.py does for step_bench): DIR holds VARIANT_ROUND.json (encoder_bench --out) for
each variant; per forward batch it prints the first variant's median forward time in every round,
then per other variant its median time and its speed ratio to the first variant in every round
(first variant's ms / this variant's ms: above 1 is faster), with the median and range of those
ratios.

  python3 bench/encoder_bench_ratios.py DIR base,variant[,variant...]
"""
import glob
import json
import statistics
import sys


def forward_medians(j):
    """{batch spec: median ms} of the windowed forward cases of one encoder_bench JSON."""
    return {c["batch"]: c["windowed"]["median_ms"]
            for c in j["cases"] if c.get("kind") == "forward"}


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    folder, variants = sys.argv[1], sys.argv[2].split(",")
    runs = {}
    for v in variants:
        files = sorted(glob.glob(f"{folder}/{v}_*.json"))
        if not files:
            sys.exit(f"no {folder}/{v}_*.json")
        runs[v] = [forward_medians(json.load(open(f))) for f in files]
    base = runs[variants[0]]
    for batch in base[0]:
        print(f"forward {batch}")
        print(f"  {variants[0]:>10}: " + " / ".join(f"{r[batch]:.3f} ms" for r in base))
        for v in variants[1:]:
            vals = [r[batch] for r in runs[v] if batch in r]
            ratios = [b[batch] / a for a, b in zip(vals, base)]
            if not ratios:
                continue
            print(f"  {v:>10}: median {statistics.median(vals):.3f} ms, speed x"
                  f"{statistics.median(ratios):.3f} [{min(ratios):.3f}, {max(ratios):.3f}] ("
                  + " / ".join(f"{x:.3f}" for x in ratios) + ")")


if __name__ == "__main__":
    main()
