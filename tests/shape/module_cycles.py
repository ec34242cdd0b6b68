# Module-level import cycles inside one crate: an edge a -> b when a module's file names
# `crate::b` (outside #[cfg(test)]). Top-level modules only (a folder counts as one).
import os, re, sys, itertools
src = sys.argv[1]
mods = {}
for dp, dn, fn in os.walk(src):
    for f in fn:
        if not f.endswith(".rs"): continue
        p = os.path.join(dp, f)
        rel = os.path.relpath(p, src)
        top = rel.split(os.sep)[0].removesuffix(".rs")
        if top in ("lib", "main"): continue
        code = open(p, encoding="utf8").read().split("#[cfg(test)]")[0]
        code = re.sub(r"//[^\n]*", "", code)
        deps = set(re.findall(r"crate::(\w+)", code))
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
