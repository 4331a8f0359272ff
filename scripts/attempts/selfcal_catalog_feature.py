# Prototype analysis (not shipped): reads the TG_FEAT file of the self-calibration prototype (7031e27 plus a TG_FEAT dump of raw features); refits with a catalog-level feature.
import json, sys, math, collections
R = collections.defaultdict(list)
for l in open(sys.argv[1]):
    d = json.loads(l); R[(d['set'], d['split'])].append(d)
SETS = ['metatool','livemcpbench','bfcl']
def zstat(s, kind):
    ps = R[(s,'pseudo')]
    if kind == 'p1': return sum(d['right'] for d in ps)/len(ps)
    xs = [d['x'] for d in ps if d['x']]
    i = {'margin':1, 'softmax':0, 'name_share':3, 'overlap':8, 'explained':9, 'twins':5}[kind]
    return sum(x[i] for x in xs)/len(xs)
def solve(A, b):
    n=len(b); M=[row[:]+[b[i]] for i,row in enumerate(A)]
    for c in range(n):
        p=max(range(c,n), key=lambda r: abs(M[r][c])); M[c],M[p]=M[p],M[c]
        for r in range(c+1,n):
            f=M[r][c]/M[c][c]
            if f:
                for k in range(c,n+1): M[r][k]-=f*M[c][k]
    x=[0]*n
    for r in range(n-1,-1,-1): x[r]=(M[r][n]-sum(M[r][k]*x[k] for k in range(r+1,n)))/M[r][r]
    return x
def fit(rows, lam=1.0):
    D=len(rows[0][0]); beta=[0.0]*D
    for it in range(30):
        g=[0.0]*D; H=[[0.0]*D for _ in range(D)]
        for x,y,w in rows:
            z=sum(b*v for b,v in zip(beta,x)); z=max(min(z,30),-30); p=1/(1+math.exp(-z))
            r=w*(p-y); q=w*p*(1-p)
            for i in range(D):
                g[i]+=r*x[i]; xi=q*x[i]; Hi=H[i]
                for j in range(i,D): Hi[j]+=xi*x[j]
        for i in range(D):
            for j in range(i): H[i][j]=H[j][i]
        for i in range(1,D): g[i]+=lam*beta[i]; H[i][i]+=lam
        H[0][0]+=1e-9
        st=solve(H,g); beta=[b-s for b,s in zip(beta,st)]
        if max(abs(s) for s in st)<1e-7: break
    return beta
def design(d, s, extra):
    return [1.0]+d['x']+[f(d,s) for f in extra]
def rows_of(s, split, extra):
    out=[]
    for d in R[(s,split)]:
        if d['x'] is None: continue
        out.append((design(d,s,extra), d['right'], d['may']))
    return out
def pred(beta,x): z=sum(b*v for b,v in zip(beta,x)); return 1/(1+math.exp(-max(min(z,30),-30)))
def sw(preds, n, t):
    sel=[y for p,y,m in preds if m and p>=t]
    return (len(sel)/n, sum(sel)/len(sel)) if sel else (0.0, float('nan'))
def run(name, extra):
    held={}
    for out in SETS:
        rows=[]
        for s in SETS:
            if s==out: continue
            rs=[(x,y) for x,y,m in rows_of(s,'tune',extra) if m]
            w=1000/len(rs); rows+= [(x,y,w) for x,y in rs]
        beta=fit(rows)
        held[out]={sp:[(pred(beta,x),y,m) for x,y,m in rows_of(out,sp,extra)] for sp in ('tune','test')}
    n={ (s,sp): len(R[(s,sp)]) for s in SETS for sp in ('tune','test')}
    rule=0.99
    for t in [i/100 for i in range(50,100)]:
        ps=[sw(held[s]['tune'],n[(s,'tune')],t) for s in SETS]
        ps=[p for c,p in ps if c>0]
        if not ps or sum(ps)/len(ps)>=0.9: rule=t; break
    res=[]
    for t in (rule, 0.84):
        cells=[]
        for s in SETS:
            c,p=sw(held[s]['test'],n[(s,'test')],t); cells.append(f'{s[:4]} {c:.3f}/{p:.3f}')
        res.append(f'@{t:.2f}: '+'  '.join(cells))
    print(name, '|', ' | '.join(res))
print({s:{k:round(zstat(s,k),3) for k in ['p1','margin','softmax','name_share','overlap','explained']} for s in SETS})
run('base', [])
for k in sys.argv[2:]:
    z={s:zstat(s,k) for s in SETS}
    run('z='+k, [lambda d,s,z=z: z[s]])
    run('z='+k+' and z*margin', [lambda d,s,z=z: z[s], lambda d,s,z=z: z[s]*d['x'][1]])
