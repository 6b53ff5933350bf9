# Session 22: the kernels of an `ncu --csv --page raw` log in launch order (time, DRAM read) and
# their per-name medians / totals; names without templates, namespaces or arguments.
#   python3 ncu_sequence.py run3/ncu_b64_mlp0.csv.xz [first N in order, default 30]
import csv, re, sys, lzma, collections, statistics

path = sys.argv[1]
first = int(sys.argv[2]) if len(sys.argv) > 2 else 30
op = lzma.open if path.endswith('.xz') else open
rows = list(csv.reader(l for l in op(path, 'rt') if l.startswith('"')))
hdr = rows[0]
ix = {h: i for i, h in enumerate(hdr)}
seq = []
for r in rows[1:]:
    if len(r) != len(hdr):
        continue
    try:
        t = float(r[ix['gpu__time_duration.sum']].replace(',', '')) / 1e3  # ns -> us
        rd = float(r[ix['dram__bytes_read.sum']].replace(',', '')) / 1e6
    except ValueError:
        continue  # the units row
    n = r[ix['Kernel Name']].replace('(anonymous namespace)::', '').replace('<unnamed>::', '')
    n = re.sub(r'^void ', '', n)
    n = re.sub(r'[<(].*', '', n).split('::')[-1]
    seq.append((n[:48], t, rd))
for n, t, rd in seq[:first]:
    print('  %-48s %8.2f us %8.2f MB' % (n, t, rd))
agg = collections.defaultdict(list)
for n, t, _ in seq:
    agg[n].append(t)
total = sum(t for _, t, _ in seq)
for n, v in sorted(agg.items(), key=lambda kv: -sum(kv[1])):
    print('%-48s n=%3d median %8.2f us total %8.1f us %5.1f%%' %
          (n, len(v), statistics.median(v), sum(v), 100 * sum(v) / total))
