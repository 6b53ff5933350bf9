# cudabd: greedy-decode tok/s per round, new / main, from a run's step_bench JSON tarball.
# Usage: python3 ratios.py run2/step_bench_json.tar.xz main both paired
import io, json, statistics as st, sys, tarfile
tar = tarfile.open(sys.argv[1])
def load(name):
    j = json.load(tar.extractfile(name))
    return {d['batch']: d['greedy_ids']['tokens_per_second'] for d in j['decode']}
names = tar.getnames()
base, configs = sys.argv[2], sys.argv[3:]
rounds = sorted({n.rsplit('_', 1)[1].split('.')[0] for n in names if n.startswith(base + '_')})
for cfg in configs:
    print(f'{cfg} / {base} (greedy ids to host, tok/s; per round)')
    for b in (1, 8, 64, 256):
        m = [load(f'{base}_{r}.json')[b] for r in rounds]
        n = [load(f'{cfg}_{r}.json')[b] for r in rounds]
        rs = ' '.join(f'{y / x:.3f}' for x, y in zip(m, n))
        print(f'  b{b:<4d} {base} median {st.median(m):8.0f}  {cfg} median {st.median(n):8.0f}  '
              f'x{st.median(n) / st.median(m):.3f}  rounds {rs}')
