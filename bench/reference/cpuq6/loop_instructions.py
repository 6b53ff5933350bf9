# All loops (backward jumps) with vpdp* inside a function: size and op mix (the S-stream loop is
# the one with S times the per-super-block ops).
import sys, re
from collections import Counter
dis, fn = sys.argv[1], sys.argv[2]
body = []; inside = False
for l in open(dis).read().split('\n'):
    if re.match(r'^[0-9a-f]+ <', l):
        inside = fn in l; continue
    m = re.match(r'\s*([0-9a-f]+):\s+(.*)', l)
    if inside and m: body.append((int(m.group(1), 16), m.group(2)))
seen = set()
for a, ins in body:
    m = re.match(r'(j\w+)\s+([0-9a-f]+)', ins)
    if m and int(m.group(2), 16) < a:
        n = [x for x in body if int(m.group(2), 16) <= x[0] <= a]
        c = Counter(x[1].split()[0] for x in n)
        if c['vpmaddubsw'] and c['vpmaddubsw'] <= 16 and len(n) not in seen:
            seen.add(len(n))
            print(f"{fn}: loop {len(n)} instr, vpmaddubsw {c['vpmaddubsw']} -> "
                  f"{len(n) / (c['vpmaddubsw'] / 4):.1f} per super-block; stack refs "
                  f"{sum(1 for x in n if '(%rsp)' in x[1])}")
