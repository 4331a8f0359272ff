import sys
from loo import *
data = load_all(sys.argv[1])
ts = [0.78,0.80,0.82,0.84,0.85,0.86,0.87,0.88,0.90]
for spec in sys.argv[2:]:
    add = [x for x in spec.split(",") if x and not x.startswith("-") and x != "base"]
    rm = [x[1:] for x in spec.split(",") if x.startswith("-")]
    names = [b for b in BASE if b not in rm] + add
    held = {}
    for s in SETS:
        beta = fit(samples([data[o]["tune"] for o in SETS if o != s], names))
        held[s] = {sp: scored(data[s][sp], beta, names) for sp in ("tune", "test")}
    allb = fit(samples([data[o]["tune"] for o in SETS], names))
    dflt = {s: scored(data[s]["test"], allb, names) for s in SETS}
    print(spec)
    for t in ts:
        cells = []
        for s in SETS:
            a = row_at(held[s]["test"], t); b = row_at(held[s]["tune"], t); d = row_at(dflt[s], t)
            cells.append(f"{a[0]:.3f}/{a[1]:.3f}[{b[1]:.2f}] d{d[0]:.3f}/{d[1]:.3f}")
        print(f"  {t:.2f}  " + "  ".join(cells))
