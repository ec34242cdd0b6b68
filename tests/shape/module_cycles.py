# Module-level import cycles inside one crate: an edge a -> b when a module's file names
# `crate::b` (outside #[cfg(test)]). Top-level modules only (a folder counts as one), or
# with `--depth 2` each folder's modules too (`engine::seams`, `mechanisms::memory`).
import os, re, sys, itertools
src = sys.argv[1]
depth = 2 if "--depth" in sys.argv and sys.argv[sys.argv.index("--depth") + 1] == "2" else 1
folders = {d for d in os.listdir(src) if os.path.isdir(os.path.join(src, d))}
mods = {}
for dp, dn, fn in os.walk(src):
    for f in fn:
        if not f.endswith(".rs"): continue
        p = os.path.join(dp, f)
        rel = os.path.relpath(p, src)
        parts = rel.split(os.sep)
        top = parts[0].removesuffix(".rs")
        if depth == 2 and top in folders and len(parts) > 1 and parts[1] != "mod.rs":
            top = top + "::" + parts[1].removesuffix(".rs")
        if top in ("lib", "main"): continue
        code = open(p, encoding="utf8").read().split("#[cfg(test)]")[0]
        code = re.sub(r"//[^\n]*", "", code)
        deps = set()
        for first, second in re.findall(r"crate::(\w+)(?:::(\w+))?", code):
            deps.add(first + "::" + second if depth == 2 and first in folders and second else first)
        # `use crate::{a, b::c}` groups
        for grp in re.findall(r"crate::\{([^}]*)\}", code):
            deps |= set(re.findall(r"(?:^|,)\s*(\w+)", grp))
        mods.setdefault(top, set()).update(d for d in deps if d != top)
names = set(mods)
edges = {a: {b for b in bs if b in names} for a, bs in mods.items()}
# strongly connected components (Tarjan)
index = {}; low = {}; stack = []; on = set(); sccs = []; i = [0]
def visit(v):
    index[v] = low[v] = i[0]; i[0] += 1; stack.append(v); on.add(v)
    for w in edges.get(v, ()):
        if w not in index: visit(w); low[v] = min(low[v], low[w])
        elif w in on: low[v] = min(low[v], index[w])
    if low[v] == index[v]:
        comp = []
        while True:
            w = stack.pop(); on.discard(w); comp.append(w)
            if w == v: break
        if len(comp) > 1: sccs.append(sorted(comp))
sys.setrecursionlimit(10000)
for v in sorted(edges):
    if v not in index: visit(v)
pairs = sorted({tuple(sorted((a, b))) for a in edges for b in edges[a] if a in edges.get(b, ())})
print(f"{src}: {len(names)} modules, {len(sccs)} cyclic groups, {len(pairs)} two-way pairs")
for c in sccs: print("  cycle:", " ".join(c))
for a, b in pairs: print(f"  {a} <-> {b}")
