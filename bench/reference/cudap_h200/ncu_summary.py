# Sums an ncu kernel-time CSV (full or reduce_ncu.py output) per kernel for one step: steps split at the embedding kernel.
# usage: python3 ncu_summary.py FILE.csv STEP
import csv, sys, re, collections
def load(p):
    rows = list(csv.reader(l for l in open(p) if not l.startswith('==')))
    hdr = rows[0]; ki = hdr.index('Kernel Name'); ti = hdr.index('gpu__time_duration.sum')
    out = []
    for r in rows[1:]:  # the units row (ns) fails the float() below
        try: out.append((r[ki], float(r[ti].replace(',', ''))))
        except: pass
    return out, None
def short(n):
    n = n.replace('void ', '').replace('infera::cuda::', '').replace('infera::', '').replace('<unnamed>::', '')
    keep = re.match(r'(attention_flash_kernel<[^>]*>|binary_vec4_kernel<[^>]*>)', n)
    if keep: return keep.group(1)
    n = re.sub(r'\(.*', '', n); n = re.sub(r'<.*', '', n)
    return n[:60]
p = sys.argv[1]; ks, unit = load(p)
# split steps at embedding kernels
steps = []; cur = []
for k, t in ks:
    if 'embedding' in k and cur: steps.append(cur); cur = []
    cur.append((k, t))
steps.append(cur)
which = int(sys.argv[2]) if len(sys.argv) > 2 else 1
s = steps[which]
tot = sum(t for _, t in s)
agg = collections.defaultdict(lambda: [0, 0])
for k, t in s:
    a = agg[short(k)]; a[0] += t; a[1] += 1
print([len(x) for x in steps]); print(f"{p}: {len(steps)} steps; step {which}: {len(s)} kernels, total {tot/1e6:.3f} ms")
for k, (t, c) in sorted(agg.items(), key=lambda x: -x[1][0])[:14]:
    print(f"  {t/1e3:9.1f} us  {100*t/tot:5.1f}%  x{c:4d}  {k}")
