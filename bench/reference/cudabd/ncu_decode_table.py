# cudabd: per-family table of one warm batched decode step from an `ncu --csv --page raw` log
# taken with step_bench --profile-step (only that step's kernels are in the log).
# GEMMs are named by their place in the layer: q, k, v (after the norm), o (after attention),
# gate, up (after the second norm), down (after swiglu), lm_head (after the final norm);
# cuBLAS helper kernels (split-k reduce etc.) count with the GEMM they follow.
# Usage: python3 ncu_decode_table.py ncu_b64.csv.xz [batch]
import csv, sys, lzma, re, collections

def load(path):
    op = lzma.open if path.endswith('.xz') else open
    lines = [l for l in op(path, 'rt') if l.startswith('"')]
    rows = list(csv.reader(lines))
    hdr = rows[0]; data = rows[2:] if rows[1][0] == '' else rows[1:]
    ix = {h: i for i, h in enumerate(hdr)}
    out = []
    for r in data:
        if len(r) < len(hdr): continue
        name = re.sub(r'\(.*', '', r[ix['Kernel Name']]); name = re.sub(r'^void ', '', name)
        name = re.sub(r'^.*::', '', name)
        def g(k):
            try: return float(r[ix[k]].replace(',', ''))
            except Exception: return float('nan')
        out.append(dict(name=name, t=g('gpu__time_duration.sum') / 1e3,
                        rd=g('dram__bytes_read.sum'), wr=g('dram__bytes_write.sum'),
                        sm=g('sm__throughput.avg.pct_of_peak_sustained_elapsed'),
                        grid=r[ix['Grid Size']], block=r[ix['Block Size']],
                        regs=g('launch__registers_per_thread')))
    return out

GEMM = re.compile(r'^(nvjet|sm90_|cutlass|splitKreduce)|gemm', re.I)

def family(ks):
    seq = []  # (family, kernel)
    pending = []  # GEMM names expected next
    for k in ks:
        n = k['name']
        if GEMM.search(n) and not n.startswith('gemv'):
            if n.startswith('splitKreduce'):
                fam = (seq[-1][0] if seq else 'gemm') + ' (split-k reduce)'
            else:
                fam = 'gemm ' + (pending.pop(0) if pending else '?')
        else:
            fam = n
            if n.startswith('add_rmsnorm'):
                # after o: gate/up; after down (the previous layer): q/k/v
                last = next((s[0] for s in reversed(seq) if s[0].startswith('gemm ') and '(reduce)' not in s[0]), 'gemm down')
                pending = ['gate', 'up'] if last == 'gemm o' else ['q', 'k', 'v']
            elif n.startswith('rmsnorm'):
                last = next((s[0] for s in reversed(seq) if s[0].startswith('gemm ')), None)
                pending = ['q', 'k', 'v'] if last is None else ['lm_head']
            elif n.startswith('attention'):
                pending = ['o']
            elif n.startswith('swiglu'):
                pending = ['down']
        seq.append((fam, k))
    return seq

def main():
    path = sys.argv[1]
    ks = load(path)
    seq = family(ks)
    tot = sum(k['t'] for _, k in seq)
    print(f'== {path}: {len(ks)} kernels, sum {tot:.1f} us (ncu serializes kernels: no PDL overlap)')
    agg = collections.OrderedDict()
    for fam, k in seq:
        a = agg.setdefault(fam, dict(n=0, t=0.0, rd=0.0, wr=0.0, sm=0.0, grid=set(), regs=k['regs']))
        a['n'] += 1; a['t'] += k['t']; a['rd'] += k['rd']; a['wr'] += k['wr']; a['sm'] += k['sm'] * k['t']
        a['grid'].add(k['grid'] + 'x' + k['block'])
    print(f"{'family':34s} {'n':>4s} {'us each':>8s} {'us/step':>8s} {'share':>6s} {'MB rd':>7s} {'MB wr':>7s} {'TB/s':>6s} {'SM%':>5s} grid x block")
    for fam, a in sorted(agg.items(), key=lambda x: -x[1]['t']):
        bw = (a['rd'] + a['wr']) / (a['t'] * 1e-6) / 1e12 if a['t'] else 0
        print(f"{fam[:34]:34s} {a['n']:4d} {a['t']/a['n']:8.2f} {a['t']:8.1f} {100*a['t']/tot:5.1f}% "
              f"{a['rd']/a['n']/1e6:7.2f} {a['wr']/a['n']/1e6:7.2f} {bw:6.2f} {a['sm']/a['t'] if a['t'] else 0:5.1f} "
              f"{','.join(sorted(a['grid']))[:40]}")
    # groups
    groups = collections.OrderedDict([('GEMMs (cuBLAS)', lambda f: f.startswith('gemm')),
                                      ('attention', lambda f: f.startswith('attention')),
                                      ('everything else', lambda f: True)])
    seen = set()
    print('groups:')
    for g, pred in groups.items():
        t = sum(a['t'] for f, a in agg.items() if f not in seen and pred(f))
        b = sum(a['rd'] + a['wr'] for f, a in agg.items() if f not in seen and pred(f))
        seen |= {f for f in agg if pred(f)}
        print(f'  {g:20s} {t:8.1f} us  {100*t/tot:5.1f}%  {b/1e9:6.3f} GB  {b/(t*1e-6)/1e12 if t else 0:5.2f} TB/s')

main()
