#!/usr/bin/env python3
"""Per-round step_bench ratios (tok/s of a case / main's in the same round) from a run's bench.log.

Usage: python3 bench/reference/cudafa/ratios.py bench/reference/cudafa/run2/bench.log
The log holds blocks '== sb <config> #<round>' followed by step_bench's output lines.
"""
import re
import sys
from collections import defaultdict

tok = defaultdict(dict)  # (config, round) -> case -> tok/s
config = None
for line in open(sys.argv[1]):
    m = re.match(r"== sb (.+) #(\d+) ", line)
    if m:
        config = (m.group(1), int(m.group(2)))
        continue
    m = re.match(r"\s*(prefill\s+\d+ x\s+\d+ tokens|decode batch\s+\d+ \(greedy ids).*?(\d+(?:\.\d+)?) tok/s", line)
    if m and config:
        tok[config][" ".join(m.group(1).split())] = float(m.group(2))
configs = sorted({c for c, _ in tok}, key=lambda c: (c != "main", c))
rounds = sorted({r for _, r in tok})
cases = list(tok[("main", rounds[0])].keys())
for case in cases:
    print(case)
    for c in configs:
        vals = [tok[(c, r)].get(case) for r in rounds]
        base = [tok[("main", r)].get(case) for r in rounds]
        cells = " / ".join(f"{v:,.0f}" for v in vals if v)
        ratios = " / ".join(f"x{v / b:.2f}" for v, b in zip(vals, base) if v and b)
        print(f"  {c:14s} {cells:40s} {'' if c == 'main' else ratios}")
