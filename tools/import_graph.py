"""The graph of module-level imports between gpucore modules, its cycles, and the imports that
were moved into functions.

    python tools/import_graph.py            each import cycle as a chain a -> b -> a, with the
                                            import statement behind each step; exit status 1
                                            when there is one
    python tools/import_graph.py --local    every function-local import of a gpucore module,
                                            as file:line, and whether it carries a comment

Only ``ast`` is used: nothing is imported, so the graph can be drawn for a tree whose imports are
broken.

What is an edge. ``A -> B`` means: running A's module body runs B's (or reads a name from B's,
which must already have run that far). Python decides this, so the rule follows what it executes:

- Only imports that run when A is imported count: those at module level, including the bodies of
  module-level ``if``/``try``/``with``/``for`` and of classes. Imports inside a function (at any
  depth) do not, nor do those under ``if TYPE_CHECKING:`` (its ``else`` branch does count).
- ``import gpucore.x.y`` and ``from gpucore.x.y import name`` run the packages on the way first:
  the edges are A -> gpucore.x (its ``__init__.py``) and A -> gpucore.x.y. Relative imports are
  resolved to the same absolute names.
- A package that *contains* A is skipped on the way: Python imports ``P.A`` only after ``P`` (so
  P's ``__init__`` has run, or is running and is the one importing A), so ``from .sibling import
  f`` in P.A is one edge, to P.sibling, never to P. This holds for every package above A, and
  for A itself when A is a package's ``__init__``.
- ``from P import x`` where x is a submodule of P (a ``.py`` file, a folder, or an extension
  module built by setup.py) is an edge to P.x. Where x is any other name, it is read from P's
  ``__init__``: that is an edge to P even when P contains A, because a half-run ``__init__`` that
  has not yet bound x is exactly how an import cycle breaks. ``from P import *`` reads P.
- ``import P`` where P contains A runs nothing and reads nothing (it binds the module): no edge.
- Only ``.py`` modules and packages with an ``__init__.py`` are nodes. A namespace package (a
  folder without one) runs no code, and an extension module imports no gpucore module, so
  neither can close a cycle.

Cycles are the strongly connected components of this graph (Tarjan); each component is shown as
the shortest cycle through each of its modules.

A function-local import is "commented" when a ``#`` comment sits on one of the statement's lines
or on the line just above it (tokenized, so a ``#`` inside a string does not count).
"""

from __future__ import annotations

import argparse
import ast
import io
import sys
import tokenize
from collections import Counter, deque
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "gpucore"
_SKIP_DIRS = {"__pycache__"}


@dataclass(frozen=True)
class Site:
    """One import statement: where it is, and its first line of source."""

    path: str  # relative to the scanned root, with forward slashes
    line: int
    text: str


@dataclass(frozen=True)
class LocalImport:
    """An import of a gpucore module inside a function body."""

    site: Site
    module: str  # the importing module
    function: str  # qualified name of the enclosing function, e.g. "Tensor.numpy"
    targets: tuple[str, ...]  # the gpucore modules it names
    commented: bool


@dataclass
class Scan:
    modules: dict[str, Path]  # module name -> file, for every .py module of the package
    graph: dict[str, dict[str, list[Site]]]  # module -> imported module -> statements
    local: list[LocalImport] = field(default_factory=list)


# ------------------------------------------------------------------------------ module names
def _discover(root: Path, package: str) -> tuple[dict[str, Path], set[str]]:
    """(.py modules by name, every other importable name: namespace packages, extensions)."""
    modules: dict[str, Path] = {}
    others: set[str] = set()
    top = root / package
    for path in sorted(top.rglob("*")):
        rel = path.relative_to(root)
        if any(p in _SKIP_DIRS or p.startswith(".") for p in rel.parts):
            continue
        if path.is_dir():
            others.add(".".join(rel.parts))
        elif path.suffix == ".py":
            parts = rel.with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            name = ".".join(parts)
            # while a module is turned into a package both may exist; Python takes the package
            if name not in modules or path.name == "__init__.py":
                modules[name] = path
        elif path.suffix in (".so", ".pyd"):
            others.add(".".join(rel.parent.parts + (path.name.split(".")[0],)))
    others.update(_extensions(root))
    return modules, others - modules.keys()


def _extensions(root: Path) -> set[str]:
    """Extension module names declared in setup.py (``Extension("gpucore._cpu", ...)``), so a
    tree that is not built still knows ``from . import _cpu`` imports a submodule."""
    setup = root / "setup.py"
    if not setup.is_file():
        return set()
    names = set()
    for node in ast.walk(ast.parse(setup.read_text(), str(setup))):
        if isinstance(node, ast.Call) and node.args:
            func = node.func
            fname = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            arg = node.args[0]
            if (
                fname == "Extension"
                and isinstance(arg, ast.Constant)
                and isinstance(arg.value, str)
            ):
                names.add(arg.value)
    return names


def _prefixes(name: str) -> list[str]:
    """'a.b.c' -> ['a', 'a.b', 'a.b.c']: the order in which Python runs them."""
    parts = name.split(".")
    return [".".join(parts[: i + 1]) for i in range(len(parts))]


def _in_package(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


# ------------------------------------------------------------------------------ one file
def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


class _Imports(ast.NodeVisitor):
    """Every import statement that can run, with the function it sits in ('' at module level)."""

    def __init__(self) -> None:
        self.found: list[tuple[ast.Import | ast.ImportFrom, str]] = []
        self._scope: list[str] = []  # enclosing classes and functions
        self._functions = 0

    def _visit_function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self._scope.append(node.name)
        self._functions += 1
        self.generic_visit(node)
        self._functions -= 1
        self._scope.pop()

    visit_FunctionDef = _visit_function
    visit_AsyncFunctionDef = _visit_function

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self._scope.append(node.name)
        self.generic_visit(node)
        self._scope.pop()

    def visit_If(self, node: ast.If) -> None:
        if not _is_type_checking(node.test):
            self.generic_visit(node)
            return
        for stmt in node.orelse:  # the TYPE_CHECKING branch never runs
            self.visit(stmt)

    def _visit_import(self, node: ast.Import | ast.ImportFrom) -> None:
        self.found.append((node, ".".join(self._scope) if self._functions else ""))

    visit_Import = _visit_import
    visit_ImportFrom = _visit_import


def _comment_lines(source: str) -> set[int]:
    lines = set()
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type == tokenize.COMMENT:
                lines.add(tok.start[0])
    except (tokenize.TokenError, SyntaxError):
        pass  # ast.parse has already accepted the file; keep what was read
    return lines


def _from_base(node: ast.ImportFrom, module: str, is_package: bool) -> str | None:
    """The absolute name of ``from <base> import ...`` in ``module``."""
    if node.level == 0:
        return node.module
    parts = module.split(".") if is_package else module.split(".")[:-1]
    if node.level - 1 > len(parts) - 1:
        return None  # beyond the top-level package: Python raises ImportError
    parts = parts[: len(parts) - (node.level - 1)]
    return ".".join(parts + ([node.module] if node.module else []))


def _targets(node, module, is_package, package, submodules) -> tuple[list[str], list[str]]:
    """(every gpucore module the statement names, the edges it makes).

    ``submodules`` is every importable name under the package (modules, folders, extensions)."""
    running = set(_prefixes(module))  # packages containing the module, and the module itself
    named: list[str] = []
    edges: list[str] = []
    if isinstance(node, ast.Import):
        for alias in node.names:
            if _in_package(alias.name, package):
                named.append(alias.name)
                edges += [p for p in _prefixes(alias.name) if p not in running]
        return named, edges
    base = _from_base(node, module, is_package)
    if base is None or not _in_package(base, package):
        return named, edges
    edges += [p for p in _prefixes(base) if p not in running]
    for alias in node.names:
        sub = f"{base}.{alias.name}"
        if alias.name != "*" and sub in submodules:
            named.append(sub)
            if sub not in running:
                edges.append(sub)
        else:
            named.append(base)
            edges.append(base)  # a name read from base's body, wherever base is
    return list(dict.fromkeys(named)), [e for e in dict.fromkeys(edges) if e != module]


# ------------------------------------------------------------------------------ the package
def scan(root: Path = ROOT, package: str = PACKAGE) -> Scan:
    """Parse every module of ``root/package``: the module-level graph and the local imports."""
    modules, others = _discover(root, package)
    submodules = modules.keys() | others
    result = Scan(modules=modules, graph={name: {} for name in modules})
    for name, path in modules.items():
        source = path.read_text(encoding="utf-8")
        tree = ast.parse(source, str(path))
        lines = source.splitlines()
        comments = _comment_lines(source)
        is_package = path.name == "__init__.py"
        collector = _Imports()
        collector.visit(tree)
        for node, function in collector.found:
            named, edges = _targets(node, name, is_package, package, submodules)
            if not named:
                continue
            site = Site(path.relative_to(root).as_posix(), node.lineno, lines[node.lineno - 1])
            if function:
                span = range(node.lineno - 1, (node.end_lineno or node.lineno) + 1)
                commented = any(n in comments for n in span)
                result.local.append(LocalImport(site, name, function, tuple(named), commented))
                continue
            for target in edges:
                if target in modules:
                    result.graph[name].setdefault(target, []).append(site)
    return result


def strongly_connected_components(graph: dict[str, dict[str, list]]) -> list[list[str]]:
    """Tarjan's algorithm; components in reverse topological order, members sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            components.append(sorted(component))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 4 * len(graph) + 100))
    try:
        for v in sorted(graph):
            if v not in index:
                visit(v)
    finally:
        sys.setrecursionlimit(limit)
    return components


def _shortest_cycle(graph: dict[str, dict[str, list]], start: str, within: set[str]) -> list[str]:
    parent: dict[str, str] = {}
    queue = deque([start])
    while queue:
        v = queue.popleft()
        for w in sorted(graph.get(v, ())):
            if w == start:
                path = [v]
                while path[-1] != start:
                    path.append(parent[path[-1]])
                return [start, *reversed(path[:-1]), start] if v != start else [start, start]
            if w in within and w not in parent:
                parent[w] = v
                queue.append(w)
    return []


def find_cycles(graph: dict[str, dict[str, list]]) -> list[list[str]]:
    """Import cycles as chains [a, b, ..., a]: for each strongly connected component, the
    shortest cycle through each of its modules, each cycle once, starting at its least module."""
    cycles: list[list[str]] = []
    for component in strongly_connected_components(graph):
        members = set(component)
        if len(component) == 1 and component[0] not in graph.get(component[0], {}):
            continue
        seen = set()
        for start in component:
            cycle = _shortest_cycle(graph, start, members)
            ring = cycle[:-1]
            i = ring.index(min(ring))
            canonical = tuple(ring[i:] + ring[:i])
            if canonical not in seen:
                seen.add(canonical)
                cycles.append([*canonical, canonical[0]])
    return sorted(cycles)


def format_cycle(graph: dict[str, dict[str, list[Site]]], cycle: list[str]) -> str:
    """'a -> b -> a', then the statement behind each step."""
    lines = [" -> ".join(cycle)]
    for a, b in zip(cycle, cycle[1:]):
        site = graph[a][b][0]
        lines.append(f"    {site.path}:{site.line}: {site.text.strip()}")
    return "\n".join(lines)


# ------------------------------------------------------------------------------ command line
def _print_cycles(result: Scan) -> int:
    cycles = find_cycles(result.graph)
    n_edges = sum(len(t) for t in result.graph.values())
    if not cycles:
        print(f"no import cycle among {len(result.graph)} modules ({n_edges} module-level edges)")
        return 0
    print(f"{len(cycles)} import cycle(s) among {len(result.graph)} modules:")
    for cycle in cycles:
        print(format_cycle(result.graph, cycle))
    return 1


def _print_local(result: Scan) -> int:
    for imp in sorted(result.local, key=lambda i: (i.site.path, i.site.line)):
        mark = "commented  " if imp.commented else "UNCOMMENTED"
        print(f"{imp.site.path}:{imp.site.line}: {mark} {imp.function}: {imp.site.text.strip()}")
    bare = Counter(i.site.path for i in result.local if not i.commented)
    n_commented = sum(i.commented for i in result.local)
    print(
        f"\n{len(result.local)} function-local gpucore imports: {n_commented} commented, "
        f"{len(result.local) - n_commented} uncommented"
    )
    for path, n in sorted(bare.items(), key=lambda kv: (-kv[1], kv[0])):
        print(f"{n:5d}  {path}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--local", action="store_true", help="list function-local imports")
    parser.add_argument("--root", type=Path, default=ROOT, help="folder holding the package")
    parser.add_argument("--package", default=PACKAGE)
    args = parser.parse_args(argv)
    result = scan(args.root, args.package)
    return _print_local(result) if args.local else _print_cycles(result)


if __name__ == "__main__":
    sys.exit(main())
