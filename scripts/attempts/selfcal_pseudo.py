# Prototype analysis (not shipped): reads the TG_DUMP file of `eval route --leave-one-out` at commit 7031e27.
import json, sys, collections
rows = collections.defaultdict(list)
for l in open(sys.argv[1]):
    d = json.loads(l)
    if d['cal'] != 'all' and d['cal'] != 'without_'+d['set']: continue
    rows[(d['set'], d['cal'][:3], d['split'])].append((d['conf'], d['may'], d['right']))
TS = [i/100 for i in range(30, 100)]
def sw(r, t):
    sel = [x for x in r if x[1] and x[0] >= t]
    if not sel: return 0.0, 1.0
    return len(sel)/len(r), sum(1 for x in sel if x[2])/len(sel)
def need(r, p=0.9):
    for t in TS:
        c, pr = sw(r, t)
        if c > 0 and pr >= p: return t
    return 0.99
out=[]
for s in ['metatool','livemcpbench','bfcl']:
    ps = rows[(s,'wit','pseudo')]
    p1 = sum(x[2] for x in ps)/len(ps)
    mean = sum(x[0] for x in ps if x[1])/max(1,sum(1 for x in ps if x[1]))
    acc = sum(x[2] for x in ps if x[1])/max(1,sum(1 for x in ps if x[1]))
    out.append('%s n%d p1 %.2f meanconf %.2f gap %.2f thr %s' % (s[:4], len(ps), p1, mean, acc-mean, [need(ps,P) for P in (0.9,0.95,0.97)]))
print(sys.argv[2], ' | '.join(out))
