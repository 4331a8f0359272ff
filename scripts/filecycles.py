"""File-level import circles inside each module directory of a Rust crate's src/: two files of
one directory (siblings, children of the same module) that use each other through `super::`,
directly or around a loop. Such a pair cannot be read, changed or tested one without the
other; the shared piece belongs in the file below both (ARCHITECTURE.md, "Layers").
Prints every circle and exits 1 when one is not in ALLOWED. `.ci/run` runs it on every
crate. Python 3 stdlib only. usage: filecycles.py SRC_DIR..."""
import os, re, sys

# Circles kept on purpose, each with its reason (paths relative to the crate's src/).
ALLOWED = {
    # A program may call a skill, and a skill is a program.
    frozenset({"programs/run.rs", "programs/skill.rs"}),
}


def strip_tests(text: str) -> str:
    """The file without its unit tests and its comments (a doc link is not an import)."""
    text = re.sub(r"#\[cfg\(test\)\]\s*mod \w+\s*\{.*", "", text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def siblings_used(text: str, names: set[str]) -> set[str]:
    """The sibling modules a file names through `super::`."""
    used = set(re.findall(r"\bsuper::(\w+)", text))
    for group in re.finditer(r"\buse super::\{([^;]*)\}", text):
        used |= set(re.findall(r"(?:^|[,{\s])(\w+)(?=\s*(?:::|,|\}|$))", group.group(1)))
    return used & names


def circles(src: str) -> list[list[str]]:
    found = []
    for root, dirs, files in os.walk(src):
        # The children of one module: `x.rs` files and `x/` directories (with mod.rs or x.rs).
        kids = {f[:-3]: os.path.join(root, f) for f in files if f.endswith(".rs") and f not in ("mod.rs", "lib.rs", "main.rs")}
        for d in dirs:
            inner = os.path.join(root, d, "mod.rs")
            if os.path.exists(inner):
                kids.setdefault(d, inner)
        names = set(kids)
        graph = {}
        for name, path in kids.items():
            text = strip_tests(open(path, encoding="utf-8", errors="replace").read())
            graph[name] = siblings_used(text, names) - {name}
        for group in strongly_connected(graph):
            if len(group) > 1:
                rel = [os.path.relpath(kids[n], src) for n in sorted(group)]
                found.append(rel)
    return found


def strongly_connected(g: dict[str, set[str]]) -> list[list[str]]:
    index, low, stack, on, out, i = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = i[0]
        i[0] += 1
        stack.append(v)
        on.add(v)
        for w in g[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            out.append(group)

    sys.setrecursionlimit(10000)
    for v in sorted(g):
        if v not in index:
            visit(v)
    return out


status = 0
for src in sys.argv[1:]:
    for group in circles(src):
        allowed = frozenset(group) in ALLOWED
        print(f"{src}: {' <-> '.join(group)}{' (allowed)' if allowed else ''}")
        if not allowed:
            status = 1
if status:
    print("file-level import circles: move what both files use into the file below both")
sys.exit(status)
