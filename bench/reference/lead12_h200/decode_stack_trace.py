"""Summarizes a decode_stack barrier trace (INFERA_CUDA_DECODE_STACK_TRACE, DecodeStackArgs::trace):
per phase, the median block's and the slowest block's time from leaving the previous barrier to
arriving at the next, the spread of arrivals, and the barrier's own latency (last arrival to first
departure).  usage: decode_stack_trace.py TRACE.bin [LAYERS=28] [BLOCKS=132]"""
import numpy as np, sys
L = int(sys.argv[2]) if len(sys.argv) > 2 else 28
G = int(sys.argv[3]) if len(sys.argv) > 3 else 132
a=np.fromfile(sys.argv[1],dtype=np.uint64)
n=5*L
a=a[:n*G*2].reshape(n,G,2).astype(np.int64)
start=a[n-1,:,0]; end=a[n-1,:,1]
t0=start.min()
names=['A qkv','B attn','C o','D gate/up','E down']
# barrier k: arrivals a[k,:,0], departures a[k,:,1]; k in 0..n-2
arr=a[:n-1,:,0]-t0; dep=a[:n-1,:,1]-t0
prev_dep=np.vstack([ (start-t0)[None,:], dep[:-1]])
work=arr-prev_dep   # per block phase time from leaving previous barrier to arriving
lat=dep.min(axis=1)-arr.max(axis=1)   # from last arrival to first departure
spread=arr.max(axis=1)-arr.min(axis=1)
print('total kernel %.1f us'%((end.max()-t0)/1e3))
for p in range(5):
    ks=[k for k in range(n-1) if k%5==p]
    w=work[ks]
    print('%-10s work median %.2f  max-block %.2f us | arrival spread %.2f | last arrival->first departure %.2f | depart spread %.2f'%(
        names[p], np.median(w)/1e3, np.median(w.max(axis=1))/1e3, np.median(spread[ks])/1e3, np.median(lat[ks])/1e3, np.median((dep.max(axis=1)-dep.min(axis=1))[ks])/1e3))
# per layer time
lay=[(dep[5*l+4 if 5*l+4<n-1 else n-2].max()- (dep[5*l-1].max() if l>0 else 0))/1e3 for l in range(L)]
print('per layer us', np.round(lay,1))
# which blocks are slowest in phase B
ks=[k for k in range(n-1) if k%5==1]
print('B slowest blocks', np.argsort(-work[ks].mean(axis=0))[:8], 'fastest', np.argsort(work[ks].mean(axis=0))[:4])
print('B work by block group: items(0-127) %.2f idle(128-131) %.2f'%(np.median(work[ks][:, :128])/1e3, np.median(work[ks][:,128:])/1e3))
