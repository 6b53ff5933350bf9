"""Per-round ratios of encoder_bench medians (windowed schedule): a base variant against others.

Usage: python3 ratios.py DIR BASE VARIANT [VARIANT ...]
DIR holds enc_<variant>_<round>.json (encoder_bench --out). For each variant, batch shape and kind
(forward; attention: one local layer's attention_packed), prints each round's base and variant
medians (ms) and base/variant (> 1: the variant is faster), then the median of those ratios.
"""
import glob
import json
import os
import re
import statistics
import sys


def medians(path):
    with open(path) as f:
        cases = json.load(f)["cases"]
    return {(c["kind"], c["batch"]): c["windowed"]["median_ms"] for c in cases}


def main(directory, base, variants):
    def rounds(name):
        found = {}
        for p in glob.glob(os.path.join(directory, f"enc_{name}_*.json")):
            m = re.search(rf"enc_{re.escape(name)}_(\d+)\.json$", p)
            if m:
                found[int(m.group(1))] = medians(p)
        return found

    base_rounds = rounds(base)
    for variant in variants:
        print(f"== {base} / {variant}")
        ratios = {}
        for r, new in sorted(rounds(variant).items()):
            if r not in base_rounds:
                continue
            for key, t in base_rounds[r].items():
                if key in new:
                    ratios.setdefault(key, []).append((t, new[key], t / new[key]))
        for (kind, batch), rs in sorted(ratios.items()):
            cells = " ".join(f"{a:.3f}/{b:.3f}=x{q:.3f}" for a, b, q in rs)
            med = statistics.median(q for _, _, q in rs)
            print(f"{kind[:9]:9s} {batch:7s} {cells}  median x{med:.3f}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3:])
