# Per-round tok/s of step_bench logs (run*/bench.log) by variant, and ratios to main's round.
# usage: python3 ab_table.py run3/bench.log
import re, sys, collections
rows = collections.OrderedDict(); cur = None
for line in open(sys.argv[1]):
    m = re.match(r'== (.*?) #(\d+) ', line)
    if m: cur = (m.group(1), int(m.group(2))); continue
    m = re.match(r'== (.*?) \(timeout', line)
    if m: cur = (m.group(1), 1); continue
    m = re.match(r'prefill\s+(\d+) x\s+(\d+) tokens: .*?(\d+) tok/s', line)
    if m and cur: rows.setdefault(cur, {})[f"prefill {m.group(1)}x{m.group(2)}"] = float(m.group(3))
    m = re.match(r'decode batch\s+(\d+) .*?(\d+) tok/s', line)
    if m and cur: rows.setdefault(cur, {})[f"decode b{m.group(1)}"] = float(m.group(2))
cases = sorted({c for r in rows.values() for c in r}, key=lambda c: (c[0], int(re.findall(r'\d+', c)[0]), c))
variants = list(dict.fromkeys(v for v, _ in rows))
for c in cases:
    print(f"\n{c}")
    for v in variants:
        vals = [(i, rows[(v, i)][c]) for (vv, i) in rows if vv == v and c in rows[(v, i)]]
        base = {i: rows[("main", i)][c] for (vv, i) in rows if vv == "main" and c in rows[("main", i)]}
        s = " / ".join(f"{x/1e3:.1f}k" + (f" (x{x/base[i]:.3f})" if v != "main" and i in base else "") for i, x in vals)
        print(f"  {v:32s} {s}")
