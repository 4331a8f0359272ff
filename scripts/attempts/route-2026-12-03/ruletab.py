import sys
from loo import *
data = load_all(sys.argv[1])
for spec in sys.argv[2:]:
    add = [x for x in spec.split(",") if x and not x.startswith("-") and x != "base"]
    rm = [x[1:] for x in spec.split(",") if x.startswith("-")]
    names = [b for b in BASE if b not in rm] + add
    r = loo(data, names, verbose=False)
    cells = " | ".join(f"{r['loo'][s]['test'][0]:.3f} / {r['loo'][s]['test'][1]:.3f}" for s in SETS)
    dcells = " | ".join(f"{r['def'][s][0]:.3f} / {r['def'][s][1]:.3f}" for s in SETS)
    print(f"| {spec} | {r['t']:.2f} | {cells} | {dcells} |")
