#!/usr/bin/env python3
"""The house's shape, checked: no import circle in the gateway crate larger than
two files, and no Rust module under any crate's src/ over 600 lines.

An import circle is the largest set of files that all reach each other through
`use` lines and inline `crate::`/`super::`/`self::` paths. A name re-exported by
a `mod.rs` counts as an import of the file that defines it. `#[cfg(test)]`
modules and `tests.rs` files are left out: tests may look anywhere.

    scripts/check-layout.py            check, exit 1 with the reasons
    scripts/check-layout.py --graph    also print every file's imports
"""

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CRATES = ["gateway", "router", "adapters", "policies", "examples"]
MAX_LINES = 600
MAX_CIRCLE = 2

ITEM = re.compile(
    r"^\s*(?:pub(?:\([^)]*\))?\s+)?(?:async\s+|const\s+|unsafe\s+|extern\s+\"C\"\s+)*"
    r"(fn|struct|enum|trait|type|const|static|mod|union)\s+([A-Za-z_][A-Za-z0-9_]*)",
    re.M,
)
MACRO = re.compile(r"macro_rules!\s*([A-Za-z_][A-Za-z0-9_]*)")
CHAR = re.compile(r"'(\\u\{[0-9a-fA-F]+\}|\\.|[^\\'])'")
USE = re.compile(r"^\s*(pub(?:\([^)]*\))?\s+)?use\s+([^;]+);", re.M)
INLINE = re.compile(r"\b((?:crate|super|self)(?:::[A-Za-z_][A-Za-z0-9_]*)+)")


def strip_comments_and_strings(text):
    """Blank out comments and string literals, keeping line structure."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            i = j
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append("\n" * text.count("\n", i, j))
            i = j
        elif c == "r" and re.match(r'r#*"', text[i:i + 10]) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            hashes = re.match(r'r(#*)"', text[i:]).group(1)
            end = text.find('"' + hashes, i + 2 + len(hashes))
            end = n if end < 0 else end + 1 + len(hashes)
            out.append('""' + "\n" * text.count("\n", i, end))
            i = end
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j + 1
        elif c == "'" and (m := CHAR.match(text, i)):
            # A char literal ('"' would otherwise open a string); a
            # lifetime (`'a`) has no closing quote and is left as it is.
            out.append("' '")
            i = m.end()
        else:
            out.append(c)
            i += 1
    return "".join(out)


def strip_cfg_test(text):
    """Drop `#[cfg(test)]` items (a module body or one item) from the text."""
    while True:
        m = re.search(r"#\[cfg\(test\)\]", text)
        if not m:
            return text
        start, i = m.start(), m.end()
        # The item ends at its closing brace, or at a `;` before any brace.
        while i < len(text) and text[i] not in "{;":
            i += 1
        if i < len(text) and text[i] == "{":
            depth = 0
            while i < len(text):
                if text[i] == "{":
                    depth += 1
                elif text[i] == "}":
                    depth -= 1
                    if depth == 0:
                        break
                i += 1
        text = text[:start] + "\n" * text.count("\n", start, i + 1) + text[i + 1:]


def expand_use(tree):
    """`a::{b, c::{d, e as f}}` -> [(a::b, b), (a::c::d, d), (a::c::e, f)]: path and local name."""
    tree = re.sub(r"\s+", " ", tree).strip()
    m = tree.find("{")
    if m < 0:
        path, _, alias = tree.partition(" as ")
        path = path.replace(" ", "")
        return [(path, alias.strip() or path.split("::")[-1])]
    prefix = tree[:m].replace(" ", "")
    body = tree[m + 1:tree.rfind("}")]
    parts, depth, cur = [], 0, ""
    for ch in body:
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        depth += ch == "{"
        depth -= ch == "}"
        cur += ch
    parts.append(cur)
    paths = []
    for part in parts:
        part = part.strip()
        if part == "self":
            paths.append((prefix.rstrip(":"), prefix.rstrip(":").split("::")[-1]))
        elif part:
            paths.extend(expand_use(prefix + part))
    return paths


class Module:
    def __init__(self, path, file):
        self.path = path  # tuple of segments after `crate`
        self.file = file
        self.items = {}  # name -> file that defines it
        self.reexports = []  # (name, absolute path) for `pub use`
        self.uses = []  # absolute paths this file imports


def module_path(src, file):
    rel = file.relative_to(src).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] in ("mod", "lib", "main"):
        parts = parts[:-1]
    return tuple(parts)


def absolute(path, here):
    """Resolve `crate::`/`super::`/`self::` against the module `here`."""
    segs = path.split("::")
    if segs[0] == "crate":
        return tuple(segs[1:])
    base = list(here)
    while segs and segs[0] in ("self", "super"):
        if segs[0] == "super":
            base = base[:-1]
        segs = segs[1:]
    return tuple(base + segs)


def analyse(crate):
    src = ROOT / crate / "src"
    files = [f for f in sorted(src.rglob("*.rs")) if f.name != "tests.rs" and f.name != "main.rs"]
    modules = {}
    texts = {}
    for f in files:
        text = strip_cfg_test(strip_comments_and_strings(f.read_text()))
        texts[f] = text
        modules[module_path(src, f)] = Module(module_path(src, f), f)
    for key, mod in modules.items():
        text = texts[mod.file]
        for kind, name in ITEM.findall(text):
            if kind != "mod":
                mod.items[name] = mod.file
        for name in MACRO.findall(text):
            mod.items[name] = mod.file
        names = {}
        for m in USE.finditer(text):
            public, tree = m.group(1), m.group(2)
            for raw, local in expand_use(tree):
                first = raw.split("::")[0]
                if first not in ("crate", "super", "self") and first not in modules_child_names(modules, key):
                    continue  # another crate, or std
                target = absolute(raw if first in ("crate", "super", "self") else "self::" + raw, key)
                if target and target[-1] == "*":
                    target = target[:-1]
                mod.uses.append(target)
                names[local] = target
                if public:
                    mod.reexports.append(target)
        # Inline paths, outside `use` lines (whose `a::{` prefixes name no item).
        for m in INLINE.finditer(USE.sub("", text)):
            mod.uses.append(absolute(m.group(1), key))
        # Paths through a name brought in by `use`: `handlers::parse_since`.
        for alias, target in names.items():
            if alias and target in modules:
                for m in re.finditer(r"\b" + re.escape(alias) + r"((?:::[A-Za-z_]\w*)+)", text):
                    mod.uses.append(target + tuple(m.group(1).split("::")[1:]))
    return src, modules


def modules_child_names(modules, key):
    return {k[-1] for k in modules if len(k) == len(key) + 1 and k[:len(key)] == key}


def resolve(modules, path, seen=None):
    """The file that defines the item at `path` (following `pub use`), or None."""
    seen = seen or set()
    if path in seen:
        return None
    seen.add(path)
    # Longest module prefix.
    for cut in range(len(path), -1, -1):
        prefix = path[:cut]
        if prefix in modules:
            mod = modules[prefix]
            rest = path[cut:]
            if not rest:
                return mod.file
            name = rest[0]
            if name in mod.items:
                return mod.items[name]
            for target in mod.reexports:
                if target and target[-1] == name:
                    return resolve(modules, target + rest[1:], seen)
            for target in mod.reexports:  # a glob re-export: `pub use x::*`
                if target in modules:
                    found = resolve(modules, target + rest, seen)
                    if found:
                        return found
            return mod.file
    return None


def graph(crate):
    src, modules = analyse(crate)
    edges = {m.file: set() for m in modules.values()}
    for mod in modules.values():
        for use in mod.uses:
            target = resolve(modules, use)
            if target and target != mod.file:
                edges[mod.file].add(target)
    return src, edges


def strongly_connected(edges):
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            out.append(comp)

    for v in edges:
        if v not in index:
            visit(v)
    return out


def main():
    failures = []
    src, edges = graph("gateway")
    if "--graph" in sys.argv:
        for f, targets in sorted(edges.items()):
            print(f.relative_to(src), "->", ", ".join(sorted(str(t.relative_to(src)) for t in targets)))
    comps = sorted(strongly_connected(edges), key=len, reverse=True)
    largest = comps[0] if comps else []
    print(f"largest import circle in gateway/src: {len(largest)} files")
    if len(largest) > 1:
        for f in sorted(largest):
            print("   ", f.relative_to(src))
    for comp in comps:
        if len(comp) > MAX_CIRCLE:
            failures.append(f"an import circle of {len(comp)} files (at most {MAX_CIRCLE})")
    for crate in CRATES:
        for f in sorted((ROOT / crate / "src").rglob("*.rs")):
            lines = sum(1 for _ in f.open())
            if lines > MAX_LINES:
                failures.append(f"{f.relative_to(ROOT)}: {lines} lines (at most {MAX_LINES})")
    for failure in failures:
        print("check-layout:", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
