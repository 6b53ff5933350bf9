#!/usr/bin/env python3
"""b1fuse run summary: step_bench ratios per round (bench.log) and the ncu step table (ncu.log.xz).
usage: summarize.py RUN_DIR"""
import collections, csv, io, lzma, re, statistics, sys

d = sys.argv[1]
var = None
med = collections.defaultdict(lambda: collections.defaultdict(list))
for line in open(f"{d}/bench.log"):
    m = re.match(r"== sb (\S+) #(\d)", line)
    if m:
        var = m.group(1)
        continue
    m = re.match(r"decode batch\s+(\d+) \((.*?)\s*\): median step\s+([\d.]+) ms\s+(\d+) tok/s", line)
    if m and var:
        med[(f"b{m.group(1)}", m.group(2))][var].append(float(m.group(3)))
    m = re.match(r"prefill\s+1 x\s+(\d+) tokens: median\s+([\d.]+) ms\s+(\d+) tok/s\s+\((.*)\)", line)
    if m and var:
        med[(f"prefill {m.group(1)}", m.group(4))][var].append(float(m.group(2)))
for case, vs in med.items():
    base = vs.get("off", [])
    parts = []
    for v, xs in vs.items():
        r = [b / x for b, x in zip(base, xs)]
        parts.append(f"{v} {' '.join(f'{x:.3f}' for x in xs)} ms" +
                     (f" (off/{v}: {' '.join(f'{q:.3f}' for q in r)}, median {statistics.median(r):.3f})" if v != "off" and r else ""))
    print(f"{case[0]:13s} {case[1]:22s} | " + " | ".join(parts))
try:
    text = lzma.open(f"{d}/ncu.log.xz", "rt").read()
except FileNotFoundError:
    sys.exit()
cfg = None
rows = collections.defaultdict(lambda: collections.defaultdict(list))
for line in text.splitlines():
    if line.startswith("== ncu"):
        cfg = line[7:].split(" (")[0]
        continue
    if cfg and line.startswith('"') and not line.startswith('"ID"'):
        f = next(csv.reader(io.StringIO(line)))
        try:
            name = re.sub(r"<.*", "", f[4]).split("::")[-1].split("(")[0]
            rows[cfg][name].append(float(f[-1].replace(",", "")))
        except Exception:
            pass
for c, v in rows.items():
    n = sum(len(x) for x in v.values())
    tot = sum(sum(x) for x in v.values())
    print(f"== {c}: {n} kernels, {tot / 1000:.1f} us")
    for k, x in sorted(v.items(), key=lambda kv: -sum(kv[1])):
        print(f"   {k[:40]:40s} n={len(x):3d}  median {statistics.median(x) / 1000:6.2f} us  sum {sum(x) / 1000:7.1f} us")
