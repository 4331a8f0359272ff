import json, re, sys
from loo import *
d = load_all(sys.argv[1])
PATH = re.compile(r'(?:^|\s)(~?/[\w.\-/]+|[\w\-]+\.(?:md|txt|csv|json|pdf|docx?|xlsx?|pptx?|png|jpe?g|html?|wav|mp3|py))\b')
OUT = set("save saved saving write writing written export exported store stored output".split())
def clauses(q):
    return [c for c in re.split(r'[.;,!?]\s|\band\b|\bthen\b', q) if c.strip()]
W = ["Desktop Commander MCP/write_file", "Filesystem MCP Server/write_file"]
def implied(q):
    for c in clauses(q):
        m = PATH.search(c)
        if m and '.' in m.group(1).split('/')[-1] and OUT & set(re.findall(r'[a-z]+', c.lower())):
            return True
    return False
for s in SETS:
    for sp in ("tune", "test"):
        rows = d[s][sp]; base = new = 0; n = 0
        for r in rows:
            ids = [f"{x['server']}/{x['name']}" for x in r["ranked"]]
            exp = set(r["exp"])
            b = sum(1 for i in ids[:5] if i in exp) / len(exp)
            if implied(r["q"]):
                n += 1
                top = ids[:5]
                for w in W:
                    if w not in top:
                        top = top[:-1] if len(top) >= 5 else top
                        top = top[:3] + [w] + top[3:] if False else top + [w]
                top = top[:5]
                # keep the first 3, then the two implied
                keep = [i for i in ids[:5] if i not in W][:3]
                top = (keep + W)[:5] if not all(w in ids[:5] for w in W) else ids[:5]
                a = sum(1 for i in top if i in exp) / len(exp)
            else:
                a = b
            base += b; new += a
        print(s, sp, "tasks with an output path", n, "R@5 %.3f -> %.3f" % (base / len(rows), new / len(rows)))
