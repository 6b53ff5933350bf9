# Per-round ratios of run 2: cd to a folder holding step_bench_json.tar.xz unpacked, then python3 ratios.py
import json,statistics as st,sys
def load(n):
    d=json.load(open(n)); r={}
    for x in d['decode']: r['decode b%d'%x['batch']]=x['greedy_ids']['tokens_per_second']
    for x in d['prefill']: r['prefill 1x%d'%x['prompt_tokens']]=x['tokens_per_second']
    for x in d.get('prefill_batch') or []: r['prefill %dx%d'%(x['sequences'],x['prompt_tokens'])]=x['tokens_per_second']
    return r
R=range(1,6)
m=[load(f'main_{i}.json') for i in R]; n=[load(f'new_{i}.json') for i in R]; t=[load(f'newint_{i}.json') for i in R]
print('%-16s %28s %28s %24s %28s'%('case','main tok/s (min-max)','merged (min-max)','merged/main per round','interleaved/merged'))
for k in m[0]:
    a=[x[k] for x in m]; b=[x[k] for x in n]; c=[x[k] for x in t]
    r1=[b[i]/a[i] for i in range(5)]; r2=[c[i]/b[i] for i in range(5)]
    print('%-16s %12.0f-%-12.0f  %12.0f-%-12.0f  med x%.3f (%.2f-%.2f)  med x%.3f (%.2f-%.2f)'%(k,min(a),max(a),min(b),max(b),st.median(r1),min(r1),max(r1),st.median(r2),min(r2),max(r2)))
