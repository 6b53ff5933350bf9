#!/usr/bin/env python3
"""Ratios of encoder_bench runs of several variants that alternated in one session, as
step_bench_ratios.py prints them for step_bench (whose report() this uses): DIR holds
VARIANT_ROUND.json (encoder_bench --out) for each variant; per forward batch the first variant's
tokens/s (tokens over the median windowed forward) in every round, then per other variant its
median and its ratio to the first variant in every round (above 1 is faster), with the median
and range of those ratios.

  python3 bench/encoder_bench_ratios.py DIR base,variant[,variant...]
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from step_bench_ratios import report  # noqa: E402


def forward_tokens_per_second(j):
    """{forward BATCH tok/s: value} of the windowed forward cases of one encoder_bench JSON."""
    return {f"forward {c['batch']} tok/s": c["tokens"] / c["windowed"]["median_ms"] * 1e3
            for c in j["cases"] if c.get("kind") == "forward"}


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    report(sys.argv[1], sys.argv[2].split(","), forward_tokens_per_second)


if __name__ == "__main__":
    main()
