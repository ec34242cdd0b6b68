# Functions over 100 lines (brace matching with a small lexer, outside #[cfg(test)] and
# tests/benches/examples dirs), and files over 800 lines.
import os, re, sys
root = sys.argv[1]
def blank_literals(text):
    out = []; i = 0; n = len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i); j = n if j < 0 else j
            out.append(" " * (j - i)); i = j; continue
        if text.startswith("/*", i):
            j = text.find("*/", i); j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j])); i = j; continue
        m = re.match(r'r(#*)"', text[i:i+10]) if c == 'r' and (i == 0 or not (text[i-1].isalnum() or text[i-1]=='_')) else None
        if m:
            close = '"' + m.group(1)
            j = text.find(close, i + len(m.group(0))); j = n if j < 0 else j + len(close)
            out.append(re.sub(r"[^\n]", " ", text[i:j])); i = j; continue
        if c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            j += 1
            out.append(re.sub(r"[^\n]", " ", text[i:j])); i = j; continue
        if c == "'":
            m = re.match(r"'(\\.[^']*|[^'\\])'", text[i:i+12])
            if m:
                out.append(" " * len(m.group(0))); i += len(m.group(0)); continue
        out.append(c); i += 1
    return "".join(out)
long_fns = []; big_files = []
for base in ["crates", "src-tauri/src"]:
    for dp, dn, fn in os.walk(os.path.join(root, base)):
        dn[:] = [d for d in dn if d not in ("tests", "benches", "examples", "target")]
        for f in fn:
            if not f.endswith(".rs"): continue
            p = os.path.join(dp, f)
            text = open(p, encoding="utf8").read()
            if text.count("\n") > 800: big_files.append((text.count("\n"), os.path.relpath(p, root)))
            code = blank_literals(text.split("#[cfg(test)]")[0])
            for m in re.finditer(r'\bfn\s+(\w+)', code):
                k = m.end(); depth = 0; opened = False
                while k < len(code):
                    ch = code[k]
                    if ch == ';' and not opened and depth == 0: break
                    if ch == '{': depth += 1; opened = True
                    elif ch == '}':
                        depth -= 1
                        if opened and depth == 0: break
                    k += 1
                if opened:
                    a = code.count("\n", 0, m.start()); b = code.count("\n", 0, k)
                    if b - a + 1 > 100: long_fns.append((b - a + 1, os.path.relpath(p, root), m.group(1)))
# nested fns inside a long fn are counted on their own too; that is what we want
long_fns.sort(reverse=True)
print("functions over 100 lines:", len(long_fns), " over 150:", sum(1 for n,_,_ in long_fns if n > 150))
for n, p, name in long_fns: print(f"  {n:4} {p}::{name}")
print("files over 800 lines:", len(big_files))
for n, p in sorted(big_files, reverse=True): print(f"  {n:5} {p}")
