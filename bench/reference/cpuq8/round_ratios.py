#!/usr/bin/env python3
"""Per-round ratios against the FIRST variant of an ab_cli.py --cpu-time result (round i of a
variant over round i of the first): median [min, max], decode and prefill per CPU second.
(bench/reference/cpuq/round_ratios.py with the first variant as the base.)
  python3 bench/reference/cpuq8/round_ratios.py bench/reference/cpuq8/abcli_q8_1t.json"""
import json
import statistics
import sys

for path in sys.argv[1:]:
    d = json.load(open(path))
    first = next(iter(d["samples"]))
    base = d["samples"][first]
    print(f"{path} (vs {first})")
    for name, rows in d["samples"].items():
        out = []
        for key in ("decode_tokens_per_cpu_second", "prefill_tokens_per_cpu_second"):
            r = [a[key] / b[key] for a, b in zip(rows, base)]
            med = statistics.median(a[key] for a in rows)
            out.append(f"{key.split('_')[0]} {med:7.2f} x{statistics.median(r):.3f} [{min(r):.3f}, {max(r):.3f}]")
        print(f"  {name:8s} " + "   ".join(out))
