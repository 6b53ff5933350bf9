# Ratios of step_bench JSON variants run alternately on the H200 (session 13):
#   python3 ab_ratios.py DIR base,variant,...   (DIR holds VARIANT_ROUND.json; ratios per round vs base)
import json,sys,glob
d=sys.argv[1]; variants=sys.argv[2].split(',')
def metrics(j):
    m={}
    for p in j['prefill']+j.get('prefill_batch',[]):
        key=f"prefill {p['sequences']}x{p['prompt_tokens']}"
        m[key+' logits']=p['tokens_per_second']
        m[key+' ids']=p['first_token_ids']['tokens_per_second']
    for q in j['decode']:
        m[f"b{q['batch']} ids"]=q['greedy_ids']['tokens_per_second']
    return m
data={v:[metrics(json.load(open(f))) for f in sorted(glob.glob(f'{d}/{v}_*.json'))] for v in variants}
base=variants[0]
keys=list(data[base][0].keys())
print('%-22s'%'metric'+''.join('%28s'%v for v in variants))
for k in keys:
    line='%-22s'%k
    for v in variants:
        vals=[r[k] for r in data[v]]
        if v==base: line+='%28s'%('/'.join('%.0f'%x for x in vals))
        else:
            rat=[a/b for a,b in zip(vals,[r[k] for r in data[base]])]
            line+='%28s'%('%.0f x%s'%(sorted(vals)[len(vals)//2],'/'.join('%.3f'%x for x in rat)))
    print(line)
