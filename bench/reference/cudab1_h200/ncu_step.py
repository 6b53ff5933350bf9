# Session tooling (cudab1): per-kernel table of one batch-1 decode step from an ncu --csv --page raw log
# (gpu__time_duration, dram__bytes_read, grid, registers), the first decode step after the prompts.
# Usage: python3 ncu_step.py ncu_x.csv.xz ...
import csv, sys, lzma, re, collections
def load(path):
    f = lzma.open(path, 'rt')
    lines = [l for l in f if l.startswith('"')]
    rows = list(csv.reader(lines))
    hdr = rows[0]; data = rows[2:] if rows[1][0]=='' else rows[1:]
    ix = {h:i for i,h in enumerate(hdr)}
    out=[]
    for r in data:
        if len(r) < len(hdr): continue
        name = r[ix['Kernel Name']]
        short = re.sub(r'\(.*','',name); short = re.sub(r'^void ','',short)
        short = re.sub(r'^.*unnamed>::','',short)
        def g(k):
            try: return float(r[ix[k]].replace(',',''))
            except: return float('nan')
        out.append(dict(name=short, full=name, t=g('gpu__time_duration.sum'), dram=g('dram__bytes_read.sum'),
                        grid=r[ix['Grid Size']], block=r[ix['Block Size']], regs=g('launch__registers_per_thread')))
    return out
def last_step(ks):
    # a decode step starts with embedding_kernel; take the last complete step
    starts=[i for i,k in enumerate(ks) if 'embedding_kernel' in k['name']]
    dec=[i for i in starts if i+2 < len(ks) and 'gemv' in ks[i+2]['name']]
    nxt=[j for j in starts if j > dec[0]]
    return ks[dec[0]:nxt[0]], len(dec)
    # choose the last step that has a following start (complete)
    if len(starts)>=2: a,b = starts[-2], starts[-1]
    else: a,b = starts[-1], len(ks)
    return ks[a:b], len(starts)
for path in sys.argv[1:]:
    ks=load(path)
    step,n=last_step(ks)
    print(f"== {path}: {len(ks)} kernels, {n} steps seen; last complete step: {len(step)} kernels, sum {sum(k['t'] for k in step)/1e3:.1f} us")
    agg=collections.OrderedDict()
    for k in step:
        key=(k['name'][:70], k['grid'], k['block'])
        a=agg.setdefault(key,[0,0.0,0.0,k['regs']]); a[0]+=1; a[1]+=k['t']; a[2]+=k['dram']
    print(f"{'kernel':70s} {'grid':>12s} {'blk':>8s} {'n':>4s} {'avg us':>7s} {'sum us':>8s} {'MB/launch':>9s} {'TB/s':>6s} regs")
    for (nm,gr,bl),(c,t,d,rg) in sorted(agg.items(), key=lambda x:-x[1][1]):
        print(f"{nm:70s} {gr:>12s} {bl:>8s} {c:4d} {t/c/1e3:7.2f} {t/1e3:8.1f} {d/c/1e6:9.2f} {d/t/1e3 if t else 0:6.2f} {rg:.0f}")
