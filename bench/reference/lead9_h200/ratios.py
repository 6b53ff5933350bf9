# Per-round ratios of the lead's session-9 H200 runs (like lead8_h200/ratios.py, but each mode against the same mode of main when main has it): unpack a run's step_bench_json.tar.xz into a
# folder, cd there, python3 ratios.py main new [other variants...] (file prefixes: main_1.json ...).
import json, statistics as st, sys, glob
def load(n):
    d = json.load(open(n)); r = {}
    for x in d['decode']: r['decode b%d' % x['batch']] = x['greedy_ids']['tokens_per_second']
    for x in d['prefill'] + (d.get('prefill_batch') or []):
        k = 'prefill %dx%d' % (x['sequences'], x['prompt_tokens'])
        r[k] = x['tokens_per_second']
        if 'first_token_ids' in x: r[k + ' ids'] = x['first_token_ids']['tokens_per_second']
    return r
names = sys.argv[1:] or ['main', 'new']
rounds = sorted(int(f.split('_')[-1][:-5]) for f in glob.glob(names[0] + '_*.json'))
data = {n: [load(f'{n}_{i}.json') for i in rounds] for n in names}
base = data[names[0]]
print('%-20s' % 'case' + ''.join('%14s' % (n + ' med') for n in names) + ''.join('  %-30s' % (n + '/' + names[0] + ' per round') for n in names[1:]))
for k in data[names[1]][0]:
    meds = [st.median(x[k] for x in data[n]) if k in data[n][0] else float('nan') for n in names]
    line = '%-20s' % k + ''.join('%14.0f' % m for m in meds)
    bk = k if k in base[0] else k[:-4]  # the same mode of main where it has it
    for n in names[1:]:
        if k not in data[n][0]: line += '  %-30s' % '-'; continue
        r = [data[n][i][k] / base[i][bk] for i in range(len(rounds))]
        line += '  x%.3f (%s)' % (st.median(r), ' '.join('%.2f' % x for x in r))
    print(line)
