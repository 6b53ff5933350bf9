# Per-kernel-family sums of one step from an ncu CSV (gpu__time_duration, dram bytes) of
# step_bench --profile-step (session 13): python3 ncu_step_summary.py FILE.csv (the second range).
import csv,sys,re,collections
def fam(name):
    n=re.sub(r'\(anonymous namespace\)|<unnamed>','',name)
    n=n.split('(')[0]
    n=re.sub(r'^void ','',n).replace('infera::cuda::::','').replace('infera::::','')
    n=re.sub(r'<.*','',n)
    return n.strip()
rows=list(csv.reader([l for l in open(sys.argv[1]) if l.startswith('"')]))
h=rows[0]; rows=rows[1:]
I=h.index('ID'); K=h.index('Kernel Name'); M=h.index('Metric Name'); V=h.index('Metric Value')
ker={}
for r in rows:
    ker.setdefault(r[I],{'name':r[K]})[r[M]]=float(r[V].replace(',',''))
# second range = 8x512 step: split by ID ordering; find the embedding kernels as step starts
ids=sorted(ker,key=int)
starts=[i for i in ids if 'embedding' in ker[i]['name']]
print('steps start at', starts)
sel=[i for i in ids if int(starts[1])<=int(i)<int(starts[2])]
agg=collections.defaultdict(lambda:[0,0,0.0,0.0])
for i in sel:
    k=ker[i]; f=fam(k['name']); a=agg[f]
    a[0]+=1; a[1]+=k.get('gpu__time_duration.sum',0); a[2]+=k.get('dram__bytes_read.sum',0); a[3]+=k.get('dram__bytes_write.sum',0)
tot=sum(a[1] for a in agg.values())
print('total us %.0f launches %d'%(tot/1e3,len(sel)))
for f,a in sorted(agg.items(),key=lambda x:-x[1][1]):
    print('%-60s %4d %9.1f us %5.1f%%  rd %7.1f MB wr %7.1f MB'%(f[:60],a[0],a[1]/1e3,100*a[1]/tot,a[2]/1e6,a[3]/1e6))
