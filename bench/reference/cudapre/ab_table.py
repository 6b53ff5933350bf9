# Per-round ratios against main's binary from a run's bench.log (cudapre runs 1-2, verify_run.sh):
# python3 ab_table.py runN/bench.log. "X new" is compared with "X main" where that exists
# (encoder_bench: ModernBERT-large forward, windowed), else with "main".
import collections, re, statistics, sys
cur = None
data = collections.defaultdict(dict)
for l in open(sys.argv[1]):
    m = re.match(r'== (.*) #(\d+) \(', l)
    if m:
        cur = (m.group(1), int(m.group(2)))
        continue
    if l.startswith('== '):
        cur = None
        continue
    m = re.match(r'prefill\s+(\d+) x\s+(\d+) tokens: median\s+([\d.]+) ms\s+(\d+) tok/s\s+\((.*)\)', l)
    if m and cur:
        data[cur][f"{m.group(1)}x{m.group(2)} {'ids' if 'ids' in m.group(5) else 'logits'}"] = float(m.group(4))
    m = re.match(r'decode batch\s+(\d+) \(greedy ids to host\): median step\s+([\d.]+) ms\s+(\d+) tok/s', l)
    if m and cur:
        data[cur][f"decode b{m.group(1)}"] = float(m.group(3))
    m = re.match(r'\s+forward\s+(\d+x\d+)\s+windowed .*\((\d+) tokens/s', l)
    if m and cur:
        data[cur][f"encoder {m.group(1)}"] = float(m.group(2))
rounds = sorted({r for _, r in data})
variants = sorted({v for v, _ in data}, key=lambda v: ('main' not in v, v))
cases = ['1x512 logits', '1x512 ids', '1x2048 logits', '1x2048 ids', '8x512 logits', '8x512 ids',
         'decode b1', 'decode b64', 'decode b256', 'encoder 1x93', 'encoder 10x512',
         'encoder 64x512']
for v in variants:
    print(v)
    for c in cases:
        vals = [data[(v, r)].get(c) for r in rounds if (v, r) in data]
        if not vals or None in vals:
            continue
        line = f"  {c:14s} median {statistics.median(vals):9.0f} tok/s"
        base = v.replace('new', 'main') if 'new' in v and (v.replace('new', 'main'), rounds[0]) in data else 'main'
        if 'main' not in v:
            rs = [data[(v, r)][c] / data[(base, r)][c] for r in rounds]
            line += f"  vs {base} " + " / ".join(f"x{x:.3f}" for x in rs)
        print(line)
