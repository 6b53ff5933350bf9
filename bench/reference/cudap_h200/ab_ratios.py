# Same-run A/B ratios from a run's bench.log ("== step_bench|encoder_bench VARIANT N" sections):
# usage: python3 ab_ratios.py run3_bench.log main new
import re, sys
fn, a, b = sys.argv[1:4]
cur = None; d = {}
for l in open(fn):
    m = re.match(r'== (step_bench|encoder_bench) (\S+) (\d)', l)
    if m: cur = (m.group(2), int(m.group(3))); continue
    if l.startswith('=='): cur = None; continue
    if not cur: continue
    m = re.match(r'prefill +(\d+) tokens: median +([\d.]+) ms +(\d+) tok/s', l)
    if m: d[(cur[0], cur[1], 'prefill ' + m.group(1))] = float(m.group(3))
    m = re.match(r'\s+forward +(\S+) +windowed +min +[\d.]+ +median +([\d.]+)', l)
    if m: d[(cur[0], cur[1], 'encoder ' + m.group(1))] = float(m.group(2))
print(f"{fn}: {a} -> {b}, pairs in run order (prefill: tok/s; encoder: median ms); speedup = {b} faster by")
for k in ['prefill 512', 'prefill 2048', 'encoder 1x93', 'encoder 50x93', 'encoder 10x512', 'encoder 64x512']:
    A = [d.get((a, i, k)) for i in (1, 2, 3)]; B = [d.get((b, i, k)) for i in (1, 2, 3)]
    pairs = [(x, y) for x, y in zip(A, B) if x and y]
    if not pairs: continue
    r = [(y / x if k.startswith('prefill') else x / y) for x, y in pairs]
    fmt = (lambda v: f"{v:,.0f}") if k.startswith('prefill') else (lambda v: f"{v:.2f}")
    print(f"  {k:15s} {' / '.join(fmt(x) for x, _ in pairs):>30s} -> {' / '.join(fmt(y) for _, y in pairs):>30s}   x{' / x'.join(f'{v:.2f}' for v in r)}")
