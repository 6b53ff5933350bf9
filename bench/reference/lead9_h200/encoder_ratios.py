"""Per-round main/new ratios of encoder_bench median forward times (windowed schedule).

Usage: python3 encoder_ratios.py DIR  (DIR holds encoder_main_<i>.json and encoder_new_<i>.json,
e.g. unpacked from a run's encoder_json.tar.xz). Prints, per batch shape, each round's main and
new medians (ms) and main/new (> 1: new is faster), then the median of the per-round ratios.
"""
import glob
import json
import os
import statistics
import sys


def medians(path):
    with open(path) as f:
        return {c["batch"]: c["windowed"]["median_ms"] for c in json.load(f)["cases"]}


def main(directory):
    rounds = sorted(glob.glob(os.path.join(directory, "encoder_main_*.json")))
    ratios = {}
    for main_path in rounds:
        new_path = main_path.replace("encoder_main_", "encoder_new_")
        if not os.path.exists(new_path):
            continue
        base, new = medians(main_path), medians(new_path)
        for batch, t in base.items():
            if batch in new:
                ratios.setdefault(batch, []).append((t, new[batch], t / new[batch]))
    for batch, rs in ratios.items():
        cells = " ".join(f"{a:.2f}/{b:.2f}=x{r:.3f}" for a, b, r in rs)
        print(f"{batch:8s} {cells}  median x{statistics.median(r for _, _, r in rs):.3f}")


if __name__ == "__main__":
    main(sys.argv[1])
