#!/usr/bin/env python3
"""Prints the expected statistics of tests/bench/bench_stats_test.cpp with numpy (the reference).

    .venv/bin/python tests/bench/make_stats_cases.py   # scripts/setup_bench_venv.sh installs numpy
"""
import numpy as np

cases = {
    "1..20 shuffled": [7, 3, 20, 1, 14, 9, 2, 18, 5, 11, 16, 4, 19, 8, 13, 6, 17, 10, 15, 12],
    "[3, 1, 2, 10]": [3, 1, 2, 10],
    "[0.25]": [0.25],
    "finite part of [nan, 1, 2, inf, 3, -inf]": [1, 2, 3],
}
for name, v in cases.items():
    a = np.asarray(v, dtype=np.float64)
    print(f"{name}: min {a.min()} p50 {np.percentile(a, 50)} p95 {np.percentile(a, 95)} "
          f"max {a.max()} mean {a.mean()}")
print("[1, 2, 4] p75:", np.percentile([1, 2, 4], 75))
