#!/usr/bin/env python3
"""No module of a crate imports, through others, a module that imports it.

For every crate of the workspace (each directory holding a Cargo.toml with
a src/), reads the modules under src/ and the paths each names through
`crate::`, `super::` and `self::` (in `use` items and in expressions
alike; the code after a `#[cfg(test)]` module is left out: a test may
reach anywhere). A path is taken to the longest module it names. An edge
between two modules counts between the children of their closest common
ancestor that hold them, so a module may always reach into its own
descendants and up to its ancestors; among siblings, the edges must form
no cycle. Each cycle is printed with one line of code for each of its
edges, and the script exits 1.

    scripts/check-cycles.py [DIR ...]     # default: the workspace's crates
"""

import re
import sys
from pathlib import Path

PATH = re.compile(r"\b(crate|super|self)((?:\s*::\s*[A-Za-z_][A-Za-z0-9_]*)+)")
GROUP = re.compile(r"\b(crate|super|self)\s*::\s*\{")
TEST_MODULE = re.compile(r"#\[cfg\(test\)\]\s*(pub(\([^)]*\))?\s+)?mod\s")
COMMENT = re.compile(r"//[^\n]*")


def modules_of(src):
    """Maps each module path (a tuple, () for the crate root) to its file."""
    modules = {}
    for file in sorted(src.rglob("*.rs")):
        relative = file.relative_to(src).with_suffix("")
        parts = list(relative.parts)
        if parts in (["lib"], ["main"]):
            parts = []
        elif parts[-1] == "mod":
            parts = parts[:-1]
        if parts and parts[0] == "bin":
            continue
        modules[tuple(parts)] = file
    return modules


def code_of(file):
    text = COMMENT.sub("", file.read_text())
    test = TEST_MODULE.search(text)
    return text[: test.start()] if test else text


def named_paths(text):
    """(line, kind, segments) of every path through crate, super or self,
    group imports (`use crate::{a, b::c}`) opened into their members."""
    for match in PATH.finditer(text):
        segments = [s.strip() for s in match.group(2).split("::") if s.strip()]
        yield text.count("\n", 0, match.start()) + 1, match.group(1), segments
    for match in GROUP.finditer(text):
        depth, at = 1, match.end()
        while depth and at < len(text):
            depth += {"{": 1, "}": -1}.get(text[at], 0)
            at += 1
        body = text[match.end() : at - 1]
        # Only the group's first-level members: nested groups name deeper items.
        flat = re.sub(r"\{[^{}]*\}", "", body)
        for member in flat.split(","):
            segments = [s.strip() for s in member.split("::") if s.strip() and s.strip() != "*"]
            if segments and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", segments[0]):
                yield text.count("\n", 0, match.start()) + 1, match.group(1), segments


def target(module, kind, segments, modules):
    """The longest module a path from `module` names."""
    if kind == "crate":
        base = ()
    elif kind == "self":
        base = module
    else:
        base = module
        while segments and segments[0] == "super":
            segments = segments[1:]
            base = base[:-1]
        base = base[:-1]
    found = base
    for segment in segments:
        if found + (segment,) in modules:
            found = found + (segment,)
        else:
            break
    return found


def sibling_edge(a, b):
    """The edge a -> b between the children of their common ancestor, or
    None when one holds the other."""
    common = 0
    while common < min(len(a), len(b)) and a[common] == b[common]:
        common += 1
    if common == len(a) or common == len(b):
        return None
    return a[: common + 1], b[: common + 1]


def cycles(edges):
    """The strongly connected components with more than one module (Tarjan)."""
    graph = {}
    for a, b in edges:
        graph.setdefault(a, set()).add(b)
        graph.setdefault(b, set())
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for next_node in sorted(graph[node]):
            if next_node not in index:
                visit(next_node)
                low[node] = min(low[node], low[next_node])
            elif next_node in on_stack:
                low[node] = min(low[node], index[next_node])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(10000)
    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def check_crate(crate):
    modules = modules_of(crate / "src")
    edges = {}
    for module, file in modules.items():
        for line, kind, segments in named_paths(code_of(file)):
            edge = sibling_edge(module, target(module, kind, segments, modules))
            if edge:
                edges.setdefault(edge, f"{file}:{line}")
    problems = []
    for component in cycles(edges):
        members = set(component)
        name = lambda m: "::".join(m) or "crate"
        lines = [f"{crate}: modules in a cycle: {', '.join(name(m) for m in component)}"]
        for (a, b), where in sorted(edges.items()):
            if a in members and b in members:
                lines.append(f"    {name(a)} -> {name(b)}   ({where})")
        problems.append("\n".join(lines))
    return problems


def crates(root):
    found = []
    for manifest in sorted(root.glob("**/Cargo.toml")):
        if any(part in ("target", ".git") for part in manifest.parts):
            continue
        if (manifest.parent / "src").is_dir():
            found.append(manifest.parent)
    return found


def main():
    root = Path(__file__).resolve().parent.parent
    dirs = [Path(d) for d in sys.argv[1:]] or crates(root)
    problems = [problem for crate in dirs for problem in check_crate(crate)]
    for problem in problems:
        print(problem)
    if problems:
        print(f"{len(problems)} import cycle(s) between modules; break each by moving what both sides need into a module of its own")
        return 1
    print(f"no import cycle between modules in {len(dirs)} crates")
    return 0


if __name__ == "__main__":
    sys.exit(main())
