#!/usr/bin/env python3
"""Ratios of step_bench runs of several variants that alternated in one session (the device
scripts under bench/reference/*_h200/ run them so): DIR holds VARIANT_ROUND.json for each
variant; per metric (prefill logits / first-token-ids tok/s, decode greedy-ids tok/s) it prints
the first variant's value in every round, then per other variant its median value and its ratio
to the first variant in every round, with the median and range of those ratios.

  python3 bench/step_bench_ratios.py DIR base,variant[,variant...]
"""
import glob
import json
import statistics
import sys


def metrics(j):
    m = {}
    for p in j["prefill"] + j.get("prefill_batch", []):
        key = f"prefill {p['sequences']}x{p['prompt_tokens']}"
        m[key + " logits"] = p["tokens_per_second"]
        m[key + " ids"] = p["first_token_ids"]["tokens_per_second"]
    for q in j["decode"]:
        m[f"b{q['batch']} ids"] = q["greedy_ids"]["tokens_per_second"]
    return m


def report(folder, variants, metrics_of):
    """Prints, per metric of metrics_of(json) (higher is better), the first variant's value in
    every round and each other variant's median and ratios to it (rounds paired by file order)."""
    runs = {}
    for v in variants:
        files = sorted(glob.glob(f"{folder}/{v}_*.json"))
        if not files:
            sys.exit(f"no {folder}/{v}_*.json")
        runs[v] = [metrics_of(json.load(open(f))) for f in files]
    base = runs[variants[0]]
    for key in base[0]:
        print(f"{key}")
        print(f"  {variants[0]:>10}: " + " / ".join(f"{r[key]:.0f}" for r in base))
        for v in variants[1:]:
            vals = [r[key] for r in runs[v] if key in r]
            ratios = [a / b[key] for a, b in zip(vals, base)]
            if not ratios:
                continue
            print(f"  {v:>10}: median {statistics.median(vals):.0f}, ratio x{statistics.median(ratios):.3f}"
                  f" [{min(ratios):.3f}, {max(ratios):.3f}] ("
                  + " / ".join(f"{x:.3f}" for x in ratios) + ")")


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    report(sys.argv[1], sys.argv[2].split(","), metrics)


if __name__ == "__main__":
    main()
