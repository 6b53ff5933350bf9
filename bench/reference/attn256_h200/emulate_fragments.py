# Emulates one warp's tile of attention_decode_mma_kernel (D=128) with the fragment layouts of
# ldmatrix / mma.sync m16n8k16, to check the index formulas against plain numpy.

import random
class M:
    def __init__(s,r,c,f=None): s.r,s.c=r,c; s.d=[[ (f() if f else 0.0) for _ in range(c)] for _ in range(r)]
    def __getitem__(s,ij): return s.d[ij[0]][ij[1]]
    def __setitem__(s,ij,v): s.d[ij[0]][ij[1]]=v
def matmul(A,B):
    C=M(A.r,B.c)
    for i in range(A.r):
        for j in range(B.c):
            C[i,j]=sum(A[i,k]*B[k,j] for k in range(A.c))
    return C
def T(A):
    B=M(A.c,A.r)
    for i in range(A.r):
        for j in range(A.c): B[j,i]=A[i,j]
    return B
def maxerr(A,B): return max(abs(A[i,j]-B[i,j]) for i in range(A.r) for j in range(A.c))
random.seed(0)
D=128; CPR=D//8; KSTEPS=D//16; TK=32
K=M(TK,D,lambda:random.gauss(0,1)); V=M(TK,D,lambda:random.gauss(0,1))
nv=3; Q=M(8,D)
for i in range(nv):
    for j in range(D): Q[i,j]=random.gauss(0,1)
# smem: chunk c of row r at (r*CPR + (c ^ (r&7))) * 8 elements
def store(Mx):
    sm=[0.0]*(TK*D)
    kRowStep=32//CPR
    for lane in range(32):
        for r in range(CPR):
            row=r*kRowStep+lane//CPR; ch=lane%CPR
            at=(row*CPR+(ch^(row&7)))*8
            for e in range(8): sm[at+e]=Mx[row,ch*8+e]
    return sm
ks=store(K); vs=store(V)
def ldm(sm, addr_of_lane, trans):
    # addr_of_lane(l) -> element offset of row start; returns regs[l][i] = (lo, hi)
    mats=[[sm[addr_of_lane(8*i+r):addr_of_lane(8*i+r)+8] for r in range(8)] for i in range(4)]
    out=[[None]*4 for _ in range(32)]
    for l in range(32):
        g,t=l//4,l%4
        for i in range(4):
            Mm=mats[i]
            out[l][i]=(Mm[g][2*t],Mm[g][2*t+1]) if not trans else (Mm[2*t][g],Mm[2*t+1][g])
    return out
def mma(c, a, b):  # c[l][4], a[l][4] pairs, b[l][2] pairs
    A=M(16,16); B=M(16,8)
    for l in range(32):
        g,t=l//4,l%4
        for e in range(2):
            A[g,2*t+e]=a[l][0][e]; A[g+8,2*t+e]=a[l][1][e]; A[g,2*t+8+e]=a[l][2][e]; A[g+8,2*t+8+e]=a[l][3][e]
            B[2*t+e,g]=b[l][0][e]; B[2*t+8+e,g]=b[l][1][e]
    C=matmul(A,B)
    for l in range(32):
        g,t=l//4,l%4
        c[l][0]+=C[g,2*t]; c[l][1]+=C[g,2*t+1]; c[l][2]+=C[g+8,2*t]; c[l][3]+=C[g+8,2*t+1]
z=(0.0,0.0)
qa=[[ ((Q[l//4,16*k+2*(l%4)],Q[l//4,16*k+2*(l%4)+1]), (Q[l//4,16*k+8+2*(l%4)],Q[l//4,16*k+8+2*(l%4)+1])) for k in range(KSTEPS)] for l in range(32)]
sc=[[[0.0]*4 for _ in range(32)] for n in range(4)]
for h in range(2):
    for k in range(KSTEPS):
        def addr(l):
            lm,lr=l//8,l%8; row=16*h+(lm>>1)*8+lr
            return (row*CPR+((2*k+(lm&1))^lr))*8
        kb=ldm(ks,addr,False)
        for n,(i0,i1) in ((2*h,(0,1)),(2*h+1,(2,3))):
            c=[sc[n][l] for l in range(32)]
            mma(c,[(qa[l][k][0],z,qa[l][k][1],z) for l in range(32)],[(kb[l][i0],kb[l][i1]) for l in range(32)])
S=M(8,TK)
for l in range(32):
    g,t=l//4,l%4
    for n in range(4):
        for e in range(2): S[g,8*n+2*t+e]=sc[n][l][e]
print("S err", maxerr(S,matmul(Q,T(K))))
P=M(8,TK)
for i in range(nv):
    for j in range(TK): P[i,j]=random.gauss(0,1)
for l in range(32):
    g,t=l//4,l%4
    for n in range(4):
        for e in range(2): sc[n][l][e]=P[g,8*n+2*t+e]
acc=[[[0.0]*4 for _ in range(32)] for j in range(2*KSTEPS)]
for h in range(2):
    pa=[((sc[2*h][l][0],sc[2*h][l][1]),z,(sc[2*h+1][l][0],sc[2*h+1][l][1]),z) for l in range(32)]
    for k in range(KSTEPS):
        def addr(l):
            lm,lr=l//8,l%8; row=16*h+(lm&1)*8+lr
            return (row*CPR+((2*k+(lm>>1))^lr))*8
        vb=ldm(vs,addr,True)
        for j,(i0,i1) in ((2*k,(0,1)),(2*k+1,(2,3))):
            c=[acc[j][l] for l in range(32)]
            mma(c,pa,[(vb[l][i0],vb[l][i1]) for l in range(32)])
O=M(8,D)
for l in range(32):
    g,t=l//4,l%4
    for j in range(2*KSTEPS):
        O[g,8*j+2*t]=acc[j][l][0]; O[g,8*j+2*t+1]=acc[j][l][1]
print("O err", maxerr(O,matmul(P,V)))
