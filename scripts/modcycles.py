"""Top-level module graph of a Rust crate's src/ from `crate::<module>` references; prints the
largest strongly connected group and exits 1 when any two top-level modules use each other,
directly or around a loop (the layering of ARCHITECTURE.md; `.ci/run` runs it on every
library crate). Python 3 stdlib only. usage: modcycles.py SRC_DIR"""
import os, re, sys
src = sys.argv[1]
mods = {}
for root, _, files in os.walk(src):
    for f in files:
        if not f.endswith(".rs"): continue
        rel = os.path.relpath(os.path.join(root, f), src)
        top = rel.split(os.sep)[0]
        top = top[:-3] if top.endswith(".rs") else top
        if top in ("lib", "main"): continue
        text = open(os.path.join(root, f), encoding="utf-8", errors="replace").read()
        text = re.sub(r"#\[cfg\(test\)\]\s*mod tests\s*\{.*", "", text, flags=re.S)  # unit tests out
        refs = set(re.findall(r"\bcrate::(\w+)", text))
        for m in re.finditer(r"\buse crate::\{([^;]*)\}", text):
            refs |= set(re.findall(r"(?:^|[,{\s])(\w+)::", m.group(1))) | set(re.findall(r"(?:^|[,{\s])(\w+)\s*(?:,|\}|$)", m.group(1)))
        mods.setdefault(top, set()).update(r for r in refs if r != top)
names = set(mods)
g = {m: {r for r in e if r in names} for m, e in mods.items()}
index, low, stack, on, sccs, i = {}, {}, [], set(), [], [0]
def sc(v):
    index[v] = low[v] = i[0]; i[0] += 1; stack.append(v); on.add(v)
    for w in g[v]:
        if w not in index: sc(w); low[v] = min(low[v], low[w])
        elif w in on: low[v] = min(low[v], index[w])
    if low[v] == index[v]:
        c = []
        while True:
            w = stack.pop(); on.discard(w); c.append(w)
            if w == v: break
        sccs.append(sorted(c))
sys.setrecursionlimit(10000)
for v in sorted(g):
    if v not in index: sc(v)
big = max(sccs, key=len)
cyc = [c for c in sccs if len(c) > 1]
print(f"{len(g)} top-level modules; {len(cyc)} cycle group(s); largest: {len(big)} ({', '.join(big) if len(big) > 1 else 'none'})")
sys.exit(0 if not cyc else 1)
