#!/usr/bin/env python3
"""b1 greedy decode per variant from a run's bench.log: median step per process, the ratio of
main's step to the variant's in the same round (>1: the variant is faster), and medians."""
import re, statistics, sys
from collections import defaultdict

steps = defaultdict(dict)  # variant -> round -> ms
name = None
for line in open(sys.argv[1]):
    m = re.match(r"== (.*) #(\d+) \(timeout", line)
    if m:
        name, rnd = m.group(1), int(m.group(2))
        continue
    m = re.search(r"decode batch +1 \(greedy ids to host\): median step +([\d.]+) ms", line)
    if m and name:
        steps[name][rnd] = float(m.group(1))
main = steps.pop("main")
print(f"{'variant':32s} {'median ms':>9s} {'tok/s':>6s}  main/variant per round  median")
print(f"{'main':32s} {statistics.median(main.values()):9.3f} "
      f"{1000 / statistics.median(main.values()):6.0f}")
for v, r in steps.items():
    ratios = [main[i] / r[i] for i in sorted(r) if i in main]
    med = statistics.median(r.values())
    print(f"{v:32s} {med:9.3f} {1000 / med:6.0f}  " + " ".join(f"{x:.3f}" for x in ratios) +
          f"  x{statistics.median(ratios):.3f}")
