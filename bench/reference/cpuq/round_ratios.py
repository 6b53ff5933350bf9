#!/usr/bin/env python3
"""Per-round ratios against 'base' of an ab_cli.py --cpu-time result (round i of a variant over
round i of base): median [min, max], for decode and prefill per CPU second.
  python3 bench/reference/cpuq/round_ratios.py bench/reference/cpuq/ab_cli_q8_0_cputime_1t.json"""
import json
import statistics
import sys

for path in sys.argv[1:]:
    d = json.load(open(path))
    base = d["samples"]["base"]
    print(path)
    for name, rows in d["samples"].items():
        out = []
        for key in ("decode_tokens_per_cpu_second", "prefill_tokens_per_cpu_second"):
            r = [a[key] / b[key] for a, b in zip(rows, base)]
            med = statistics.median(a[key] for a in rows)
            out.append(f"{key.split('_')[0]} {med:7.2f} x{statistics.median(r):.3f} [{min(r):.3f}, {max(r):.3f}]")
        print(f"  {name:5s} " + "   ".join(out))
