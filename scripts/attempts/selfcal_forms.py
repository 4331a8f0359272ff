# Prototype analysis (not shipped): reads the TG_DUMP file of `eval route --leave-one-out` at commit 7031e27.
# Formal leave-one-out check of the self-calibration forms.
import json, sys, collections, math
rows = collections.defaultdict(list)
for l in open(sys.argv[1]):
    d = json.loads(l)
    rows[(d['set'], d['cal'], d['split'])].append((d['conf'], d['may'], d['right']))
SETS = ['metatool','livemcpbench','bfcl']
TS = [i/100 for i in range(30, 100)]
def sw(r, t):
    sel = [x for x in r if x[1] and x[0] >= t]
    if not sel: return 0.0, float('nan')
    return len(sel)/len(r), sum(1 for x in sel if x[2])/len(sel)
def need(r, p):
    for t in TS:
        c, pr = sw(r, t)
        if c > 0 and pr >= p: return t
    return 0.99
def logit(p): p=min(max(p,1e-6),1-1e-6); return math.log(p/(1-p))
def shifted(r, b): return [(1/(1+math.exp(-(logit(c)+b))), m, y) for c,m,y in r]
def calib_shift(ps):
    # intercept shift b so mean shifted conf over may-select pseudo-tasks == their accuracy
    sel = [x for x in ps if x[1]]
    acc = sum(x[2] for x in sel)/len(sel)
    lo, hi = -10, 10
    for _ in range(60):
        b = (lo+hi)/2
        m = sum(c for c,_,_ in shifted(sel,b))/len(sel)
        if m < acc: lo = b
        else: hi = b
    return (lo+hi)/2
print('Form 1: per-catalog threshold = lowest t where pseudo-task selections reach P*')
for out in SETS:
    cal = 'without_'+out; others=[s for s in SETS if s!=out]
    # choose P*: lowest P* where both tuning catalogs' adaptive thresholds give >= 0.9 right on their tune splits
    chosen=None
    for P in [0.90,0.92,0.94,0.95,0.96,0.97,0.98,0.99,0.995,1.0]:
        ok = all(sw(rows[(s,cal,'tune')], need(rows[(s,cal,'pseudo')],P))[1] >= 0.9 for s in others)
        if ok: chosen=P; break
    if chosen is None: chosen=1.0
    t = need(rows[(out,cal,'pseudo')], chosen)
    tune = sw(rows[(out,cal,'tune')], t); test = sw(rows[(out,cal,'test')], t)
    print(f'  left out {out}: P* {chosen} (tuning thresholds {[need(rows[(s,cal,"pseudo")],chosen) for s in others]}), its threshold {t:.2f}: tune {tune[0]:.3f}/{tune[1]:.3f} test {test[0]:.3f}/{test[1]:.3f}  (shared 0.84: test %.3f/%.3f)' % sw(rows[(out,cal,'test')],0.84))
print('Form 2: intercept shift calibrating the pseudo-tasks, shared threshold chosen on the two tuning catalogs')
for out in SETS:
    cal = 'without_'+out; others=[s for s in SETS if s!=out]
    b = {s: calib_shift(rows[(s,cal,'pseudo')]) for s in SETS}
    chosen = 0.99
    for t in TS:
        if all(sw(shifted(rows[(s,cal,'tune')], b[s]), t)[1] >= 0.9 for s in others if sw(shifted(rows[(s,cal,'tune')], b[s]), t)[0] > 0):
            chosen = t; break
    tune = sw(shifted(rows[(out,cal,'tune')],b[out]), chosen); test = sw(shifted(rows[(out,cal,'test')],b[out]), chosen)
    print(f'  left out {out}: shifts {", ".join("%s %+.2f" % (s[:4], b[s]) for s in SETS)}; threshold {chosen:.2f}: tune {tune[0]:.3f}/{tune[1]:.3f} test {test[0]:.3f}/{test[1]:.3f}')
