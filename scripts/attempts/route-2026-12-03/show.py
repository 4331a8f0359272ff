import sys
from loo import *
data = load_all(sys.argv[1]); names = BASE + [x for x in sys.argv[2].split(",") if x]
t = float(sys.argv[3]); s = sys.argv[4]
allb = fit(samples([data[o]["tune"] for o in SETS], names))
for c, r in scored(data[s]["test"], allb, names):
    if c is not None and r["may"] and c >= t:
        x = r["ranked"]
        print(f"{c:.3f} {'OK ' if r['right'] else 'BAD'} {x[0]['server'][:20]}/{x[0]['name']} | 2nd {x[1]['name'] if len(x)>1 else '-'} | {r['q'][:120]}")
