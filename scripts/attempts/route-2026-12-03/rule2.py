import sys
from loo import *
data = load_all(sys.argv[1])
def apply_rule(builder, label):
    held = {}
    for s in SETS:
        conf = builder([o for o in SETS if o != s])
        held[s] = {sp: [(conf(r), r) for r in data[s][sp]] for sp in ("tune", "test")}
    t0 = 0.99
    for t in [i / 100 for i in range(50, 100)]:
        if all((lambda c: c[0] == 0 or c[1] >= 0.9)(row_at(held[s][sp], t)) for s in SETS for sp in ("tune", "test")):
            t0 = t; break
    conf = builder(SETS)
    cells = " | ".join(f"{row_at(held[s]['test'], t0)[0]:.3f} / {row_at(held[s]['test'], t0)[1]:.3f}" for s in SETS)
    d = " | ".join(f"{row_at([(conf(r), r) for r in data[s]['test']], t0)[0]:.3f} / {row_at([(conf(r), r) for r in data[s]['test']], t0)[1]:.3f}" for s in SETS)
    print(f"| {label} | {t0:.2f} | {cells} | {d} |")
def linear(names, transform=None, lam=1.0):
    def b(train):
        beta = fit(samples([data[o]["tune"] for o in train], names, transform), lam)
        return lambda r: predict(beta, vec(r, names, transform)) if r["f"] is not None else None
    return b
KN = {"softmax_logit":[-2,0,2,4], "margin":[0.05,0.15,0.3,0.5], "coverage":[0.2,0.35,0.5], "name_share":[0.34,0.67], "task_explained":[0.2,0.4,0.6]}
def hinge(feats):
    idx = {n:i for i,n in enumerate(BASE)}
    def tr(row, x):
        out = list(x)
        for n in feats:
            out += [max(0.0, x[idx[n]] - k) for k in KN[n]]
        return out
    return tr
def cascade(names2, c0, lam2):
    def b(train):
        b1 = fit(samples([data[o]["tune"] for o in train], BASE))
        sub = []
        for o in train:
            rows = [r for r in data[o]["tune"] if r["f"] is not None and r["may"] and predict(b1, vec(r, BASE)) >= c0]
            w = 1000.0 / max(1, len(data[o]["tune"]))
            sub += [(vec(r, names2), 1.0 if r["right"] else 0.0, w) for r in rows]
        b2 = fit(sub, lam2)
        def conf(r):
            if r["f"] is None: return None
            c1 = predict(b1, vec(r, BASE))
            return predict(b2, vec(r, names2)) if c1 >= c0 else c1
        return conf
    return b
def fixed(mode):
    def b(train):
        K = len(train); out = []
        for k, o in enumerate(train):
            rs = [(vec(r, BASE), 1.0 if r["right"] else 0.0) for r in data[o]["tune"] if r["f"] is not None and r["may"]]
            w = 1000.0 / max(1, len(rs))
            out += [(x + [1.0 if j == k else 0.0 for j in range(1, K)], y, w) for x, y in rs]
        bb = fit(out); nf = len(BASE)
        ints = [bb[0]] + [bb[0] + bb[1 + nf + j] for j in range(K - 1)]
        beta = [sum(ints) / K if mode == "mean" else min(ints)] + bb[1:1 + nf]
        return lambda r: predict(beta, vec(r, BASE)) if r["f"] is not None else None
    return b
apply_rule(linear(BASE), "shipped (12 features)")
for f in ["margin", "softmax_logit", "coverage", "task_explained"]:
    apply_rule(linear(BASE, hinge([f])), f"hinges on {f}")
apply_rule(linear(BASE, hinge(list(KN))), "hinges on all five")
for c0 in (0.3, 0.5):
    apply_rule(cascade(BASE, c0, 1.0), f"cascade c0={c0}")
    apply_rule(cascade(BASE + ["robust_margin", "top_word_share", "described_margin"], c0, 5.0), f"cascade +3 c0={c0} lam5")
apply_rule(fixed("mean"), "fixed effects, mean intercept")
apply_rule(fixed("min"), "fixed effects, lowest intercept")
