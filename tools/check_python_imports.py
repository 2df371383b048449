#!/usr/bin/env python3
"""Fails on an import cycle among the modules of a package under python/.

  tools/check_python_imports.py REPO_ROOT

Issue 28 (deliverable 4): no Python import cycle. For each package
(python/<pkg>/__init__.py), every `import` and `from ... import` of the
package's own modules is an edge, wherever it stands (a function-local
import counts: it only defers the cycle to the call). `from pkg import name`
is an edge to pkg.name when that is a module, else to the package
(__init__.py); relative imports resolve the same way; a compiled module
(`_gpusim`, seen by its .pyi stub or shared object) is a leaf. Cycles are the
strongly connected components of more than one module, or a module importing
itself; each is printed (`a -> b -> a`) and, unless KNOWN lists it, the exit
status is 1. A KNOWN entry that is no longer a cycle is an error too.
"""
import ast
import sys
from pathlib import Path

# Cycles left as they are, each with its reason: (package, sorted modules).
KNOWN: dict = {}


def ModuleGraph(pkg_dir):
    """{module: {imported module}} of the package at `pkg_dir` (flat, one level)."""
    pkg = pkg_dir.name
    files = {p.stem: p for p in sorted(pkg_dir.glob("*.py"))}
    compiled = {p.name.split(".")[0] for p in pkg_dir.iterdir() if p.suffix in (".pyi", ".so")}

    def Name(stem):
        return pkg if stem == "__init__" else f"{pkg}.{stem}"

    def Target(module, name):
        """The module `from module import name` loads, or None outside the package."""
        if module == pkg:
            return Name(name) if name in files or name in compiled else pkg
        if module.startswith(pkg + "."):
            return module
        return None

    graph = {}
    for stem, path in files.items():
        edges = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name == pkg or alias.name.startswith(pkg + "."):
                        edges.add(alias.name)
            elif isinstance(node, ast.ImportFrom):
                module = node.module or ""
                if node.level > 0:  # relative: one level below the package
                    module = pkg + ("." + module if module else "")
                for alias in node.names:
                    target = Target(module, alias.name)
                    if target is not None:
                        edges.add(target)
        graph[Name(stem)] = edges
    return graph


def Cycles(graph):
    """The strongly connected components with a cycle (Tarjan), each sorted."""
    index, low, on_stack, stack, out = {}, {}, set(), [], []

    def Visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in graph:
                continue
            if w not in index:
                Visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1 or v in graph.get(v, ()):
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            Visit(v)
    return out


def CyclePath(graph, comp):
    """The shortest cycle through the component's first module, as `a -> b -> a`."""
    start = comp[0]
    members = set(comp)
    prev = {}
    frontier = [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(graph[v] & members):
                if w == start:
                    path = [v]
                    while path[-1] != start:
                        path.append(prev[path[-1]])
                    return " -> ".join(list(reversed(path)) + [start])
                if w not in prev:
                    prev[w] = v
                    nxt.append(w)
        frontier = nxt
    return start


def main(argv):
    if len(argv) != 2:
        print("usage: tools/check_python_imports.py REPO_ROOT", file=sys.stderr)
        return 2
    root = Path(argv[1])
    bad = 0
    seen = set()
    packages = sorted(p.parent for p in (root / "python").glob("*/__init__.py"))
    for pkg_dir in packages:
        graph = ModuleGraph(pkg_dir)
        for comp in Cycles(graph):
            key = (pkg_dir.name, tuple(comp))
            if key in KNOWN:
                seen.add(key)
                print(f"python/{pkg_dir.name}: known import cycle ({KNOWN[key]}): {CyclePath(graph, comp)}")
                continue
            print(f"python/{pkg_dir.name}: import cycle among {', '.join(comp)}: {CyclePath(graph, comp)}")
            bad += 1
    for key in sorted(set(KNOWN) - seen):
        print(f"python/{key[0]}: {', '.join(key[1])} is no longer a cycle: remove it from KNOWN in "
              "tools/check_python_imports.py")
        bad += 1
    if bad:
        return 1
    print(f"no import cycle in {', '.join('python/' + p.name for p in packages)} beyond the {len(seen)} known")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
