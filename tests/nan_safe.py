"""NaN-safe comparison for the Python tests: a NaN or inf is the worst difference, never skipped.

Python's max() drops NaNs depending on their position (max([1.0, nan]) == 1.0), so a plain
max(abs(a - b)) can pass a broken output.
"""
import math


def max_abs_diff(got, want):
    got, want = list(got), list(want)
    if len(got) != len(want):
        return math.inf
    worst = 0.0
    for a, b in zip(got, want):
        if not (math.isfinite(a) and math.isfinite(b)):
            return math.inf
        worst = max(worst, abs(a - b))
    return worst
