"""Offline leave-one-out over eval --json dumps: replicates eval_loo.rs (fit on other sets'
tuning splits, lambda=1, each set weighing 1000; threshold rule; default fit on all)."""
import json, math, sys, os

SETS = ["metatool", "livemcpbench", "bfcl"]

def load(path):
    rows = []
    with open(path) as f:
        for line in f:
            o = json.loads(line)
            if "query" not in o:
                continue
            ranked = o["ranked"]
            right = bool(ranked) and f'{ranked[0]["server"]}/{ranked[0]["name"]}' in o["expected"]
            exp = set(o["expected"])
            r5 = sum(1 for r in ranked[:5] if f'{r["server"]}/{r["name"]}' in exp) / max(1, len(exp))
            rows.append(dict(q=o["query"], f=o.get("features"), may=o.get("may_select", False),
                             fixed=(o["decision"] == "select") if o.get("features") is None else None,
                             right=right, r5=r5, conf=o["confidence"], ranked=ranked, exp=o["expected"]))
    return rows

def solve(a, b):
    n = len(b)
    a = [r[:] for r in a]; b = b[:]
    for c in range(n):
        p = max(range(c, n), key=lambda i: abs(a[i][c]))
        if abs(a[p][c]) < 1e-12: return None
        a[c], a[p] = a[p], a[c]; b[c], b[p] = b[p], b[c]
        for r in range(c + 1, n):
            f = a[r][c] / a[c][c]
            if f:
                for k in range(c, n): a[r][k] -= f * a[c][k]
                b[r] -= f * b[c]
    x = [0.0] * n
    for r in range(n - 1, -1, -1):
        x[r] = (b[r] - sum(a[r][k] * x[k] for k in range(r + 1, n))) / a[r][r]
    return x

def fit(samples, lam=1.0):
    D = len(samples[0][0]) + 1
    beta = [0.0] * D
    for _ in range(50):
        g = [0.0] * D; H = [[0.0] * D for _ in range(D)]
        for x, y, w in samples:
            xi = [1.0] + x
            z = sum(b * v for b, v in zip(beta, xi))
            z = max(-30, min(30, z))
            p = 1 / (1 + math.exp(-z))
            r = p - y
            pw = w * p * (1 - p)
            for i in range(D):
                g[i] += w * r * xi[i]
                hi = H[i]; a = pw * xi[i]
                for j in range(i, D):
                    hi[j] += a * xi[j]
        for i in range(D):
            for j in range(i): H[i][j] = H[j][i]
        for i in range(1, D):
            g[i] += lam * beta[i]; H[i][i] += lam
        H[0][0] += 1e-9
        st = solve(H, g)
        if st is None: break
        beta = [b - s for b, s in zip(beta, st)]
        if max(abs(s) for s in st) < 1e-8: break
    return beta

def predict(beta, x):
    z = beta[0] + sum(b * v for b, v in zip(beta[1:], x))
    return 1 / (1 + math.exp(-max(-30, min(30, z))))

def vec(row, names, transform=None):
    x = [float(row["f"][n]) for n in names]
    return transform(row, x) if transform else x

def samples(tunes, names, transform=None):
    out = []
    for rows in tunes:
        rs = [(vec(r, names, transform), 1.0 if r["right"] else 0.0) for r in rows if r["f"] is not None and r["may"]]
        w = 1000.0 / max(1, len(rs))
        out += [(x, y, w) for x, y in rs]
    return out

def scored(rows, beta, names, transform=None):
    return [(predict(beta, vec(r, names, transform)) if r["f"] is not None else None, r) for r in rows]

def row_at(sc, t):
    sel = right = 0
    for c, r in sc:
        s = r["fixed"] if c is None else (r["may"] and bool(r["ranked"]) and c >= t - 1e-7)
        if s:
            sel += 1; right += r["right"]
    n = max(1, len(sc))
    return sel / n, (right / sel if sel else 1.0), sel, right

def load_all(d):
    return {s: {sp: load(f"{d}/{s}_{sp}.jsonl") for sp in ("tune", "test")} for s in SETS}

def loo(data, names, transform=None, lam=1.0, verbose=True, fixed_t=None):
    held = {}
    for s in SETS:
        beta = fit(samples([data[o]["tune"] for o in SETS if o != s], names, transform), lam)
        held[s] = {sp: scored(data[s][sp], beta, names, transform) for sp in ("tune", "test")}
    ts = [i / 100 for i in range(50, 100)]
    chosen = fixed_t
    if chosen is None:
        chosen = 0.99
        for t in ts:
            if all((lambda c: c[0] == 0 or c[1] >= 0.9)(row_at(held[s][sp], t)) for s in SETS for sp in ("tune", "test")):
                chosen = t; break
    allb = fit(samples([data[o]["tune"] for o in SETS], names, transform), lam)
    res = {"t": chosen, "loo": {}, "def": {}, "beta": allb}
    for s in SETS:
        res["loo"][s] = {sp: row_at(held[s][sp], chosen) for sp in ("tune", "test")}
        res["def"][s] = row_at(scored(data[s]["test"], allb, names, transform), chosen)
    if verbose:
        show(res)
    return res

def show(res):
    t = res["t"]
    print(f"threshold {t:.2f}")
    for s in SETS:
        a = res["loo"][s]["test"]; b = res["loo"][s]["tune"]; d = res["def"][s]
        print(f"  {s:13s} LOO test {a[0]:.3f}/{a[1]:.3f} ({a[3]}/{a[2]})  tune {b[0]:.3f}/{b[1]:.3f}  | default test {d[0]:.3f}/{d[1]:.3f} ({d[3]}/{d[2]})")

BASE = ["softmax_logit","margin","coverage","name_share","name_share_gap","near_twins","server_named","top_two_overlap","task_explained","task_explained_gap","coverage_shortfall","described_first"]

if __name__ == "__main__":
    data = load_all(sys.argv[1])
    names = sys.argv[2].split(",") if len(sys.argv) > 2 else BASE
    r = loo(data, names)
    print(" ".join(f"{b:.4f}" for b in r["beta"]))
