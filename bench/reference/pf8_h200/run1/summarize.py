# ncu csv (gpu__time_duration.sum): the attention kernel's median per launch in groups of 28
# launches (launch order: the 1x512, 1x2048, 8x512 steps), and for the full run, the launches split
# into steps at each embedding kernel (a forward's first), per kernel family of the longest step.
import csv, io, lzma, statistics, collections, sys
cfg = None; rows = collections.defaultdict(list)
for line in lzma.open(sys.argv[1], "rt"):
    if line.startswith("== ncu"): cfg = line[7:].split(" (")[0]; continue
    if cfg and line.startswith('"') and not line.startswith('"ID"'):
        f = next(csv.reader(io.StringIO(line)))
        try: rows[cfg].append((f[4], f[8], float(f[-1].replace(",", ""))))
        except Exception: pass
def family(name):
    return name.split("(")[0].split("<")[0].split("::")[-1][:40]
for c, v in rows.items():
    if c.startswith("attn"):
        xs = [t for _, _, t in v]
        for i in range(0, len(xs), 28):
            ch = xs[i:i + 28]
            print(c, f"launches {i}-{i + len(ch) - 1} grid {v[i][1]}: median {statistics.median(ch) / 1000:.2f} us, sum {sum(ch) / 1000:.1f} us")
        continue
    steps = [[]]
    for r in v:
        if "embed" in r[0].lower() and steps[-1]: steps.append([])
        steps[-1].append(r)
    for k, st in enumerate(steps):
        print(c, f"step {k}: {len(st)} launches, {sum(t for _, _, t in st) / 1000:.1f} us")
    st = max(steps, key=lambda s: sum(t for _, _, t in s))
    tot = collections.defaultdict(float); cnt = collections.Counter()
    for n, _, t in st: tot[family(n)] += t; cnt[family(n)] += 1
    s = sum(tot.values())
    print(c, f"longest step: total {s / 1000:.1f} us over {sum(cnt.values())} launches")
    for k, t in sorted(tot.items(), key=lambda x: -x[1])[:18]:
        print(f"  {k:42s} {t / 1000:9.1f} us {100 * t / s:5.1f} % ({cnt[k]}x, {t / cnt[k] / 1000:.2f} us each)")
