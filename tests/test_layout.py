"""The tree's discipline: every source file stays under a line cap, and the gpucore package has no
module-level import cycle.

Line caps (tinygrad keeps its size in check the same way, in CI): 600 lines for Python, 900 for C
and GLSL. A file over its cap is split along its sections. One that should stay whole is named in
LARGE_FILES with the reason, and must leave it once it is back under the cap.

Import cycles: tools/import_graph.py draws the graph of module-level imports between gpucore
modules; its docstring gives the rule for an edge, and the tests at the end of this file pin it
down on small packages. With a cycle, whether ``import gpucore.x`` works depends on what was
imported before it. Function-local imports are not edges: ``python tools/import_graph.py
--local`` lists them, and each must carry a comment saying why it is local.
"""

from __future__ import annotations

import importlib.util
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# ------------------------------------------------------------------------------ line caps
CAPS = {".py": 600, ".c": 900, ".h": 900, ".comp": 900, ".glsl": 900}
SCANNED = ("gpucore", "tests", "tools", "benchmarks", "cpu", "shaders")

# path -> why it should stay one file above its cap. Keep it short and true: an entry whose file
# is back under the cap (or gone) fails test_every_large_file_allowed_is_still_large.
LARGE_FILES: dict[str, str] = {}


def _source_files() -> list[str]:
    found = []
    for top in SCANNED:
        for path in (ROOT / top).rglob("*"):
            rel = path.relative_to(ROOT)
            if any(p == "__pycache__" or p.startswith(".") for p in rel.parts):
                continue
            if path.suffix in CAPS and path.is_file():
                found.append(rel.as_posix())
    return sorted(found)


def line_count(rel: str) -> int:
    data = (ROOT / rel).read_bytes()
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


def cap(rel: str) -> int:
    return CAPS[Path(rel).suffix]


def over_cap() -> dict[str, int]:
    """Every source file over its cap, allowed or not: path -> lines."""
    counts = {rel: line_count(rel) for rel in _source_files()}
    return {rel: n for rel, n in counts.items() if n > cap(rel)}


def test_the_line_cap_sees_every_kind_of_source():
    kinds = {Path(rel).suffix for rel in _source_files()}
    assert kinds == set(CAPS), f"no files found with suffixes {set(CAPS) - kinds}"
    assert "gpucore/tensor.py" in _source_files()


def test_no_source_file_exceeds_its_line_cap():
    offenders = {rel: n for rel, n in over_cap().items() if rel not in LARGE_FILES}
    report = "\n".join(f"  {rel}: {n} lines (cap {cap(rel)})" for rel, n in offenders.items())
    assert not offenders, (
        f"{len(offenders)} file(s) over the line cap; split each along its sections, or name it "
        f"in LARGE_FILES (tests/test_layout.py) with the reason it should stay whole:\n{report}"
    )


def test_every_large_file_allowed_is_still_large():
    large = over_cap()
    stale = [rel for rel in LARGE_FILES if rel not in large]
    assert not stale, (
        "LARGE_FILES names files that are no longer over their cap; remove them: "
        + ", ".join(
            f"{rel} ({line_count(rel)} lines, cap {cap(rel)})"
            if (ROOT / rel).is_file()
            else f"{rel} (gone)"
            for rel in stale
        )
    )
    assert all(reason.strip() for reason in LARGE_FILES.values()), "every entry needs a reason"


# ------------------------------------------------------------------------------ import cycles
def _tool():
    spec = importlib.util.spec_from_file_location(
        "import_graph", ROOT / "tools" / "import_graph.py"
    )
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up while the file runs
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def ig():
    return _tool()


def test_gpucore_has_no_module_level_import_cycle(ig):
    scan = ig.scan(ROOT, "gpucore")
    assert "gpucore.tensor" in scan.graph and any(scan.graph.values()), "the scan found no imports"
    cycles = ig.find_cycles(scan.graph)
    report = "\n".join(ig.format_cycle(scan.graph, c) for c in cycles)
    assert not cycles, (
        f"{len(cycles)} import cycle(s) among gpucore modules (python tools/import_graph.py):\n"
        f"{report}"
    )


def test_every_function_local_gpucore_import_says_why(ig):
    scan = ig.scan(ROOT, "gpucore")
    bare = [
        f"  {li.site.path}:{li.site.line}: {li.site.text}" for li in scan.local if not li.commented
    ]
    assert not bare, (
        "function-local imports of gpucore modules need a comment saying why they are not at "
        "module level (usually the import cycle they avoid); move the others up:\n"
        + "\n".join(bare)
    )


# ------------------------------------------------------------------------------ the edge rule
def _scan(ig, tmp_path, files: dict[str, str]):
    for rel, text in files.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return ig.scan(tmp_path, "pkg")


def _edges(ig, tmp_path, files: dict[str, str]) -> dict[str, set[str]]:
    graph = _scan(ig, tmp_path, files).graph
    return {m: set(targets) for m, targets in graph.items() if targets}


def test_relative_and_absolute_imports_make_the_same_edge(ig, tmp_path):
    edges = _edges(
        ig,
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/a.py": "from .b import f\n",
            "pkg/b.py": "def f(): pass\n",
            "pkg/c.py": "import pkg.b\nfrom pkg.b import f\n",
            "pkg/d.py": "from . import b\n",  # b is a submodule: an edge to it, not to pkg
        },
    )
    assert edges == {"pkg.a": {"pkg.b"}, "pkg.c": {"pkg.b"}, "pkg.d": {"pkg.b"}}


def test_importing_a_submodule_runs_each_package_on_the_way(ig, tmp_path):
    edges = _edges(
        ig,
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/a.py": "from .sub.deep import g\n",
            "pkg/b.py": "import pkg.sub.deep\n",
            "pkg/c.py": "from .sub import h\n",  # a name bound by sub/__init__.py
            "pkg/sub/__init__.py": "def h(): pass\n",
            "pkg/sub/deep.py": "def g(): pass\n",
        },
    )
    # pkg itself contains the importers: it has run (or is running) before they do
    assert edges == {
        "pkg.a": {"pkg.sub", "pkg.sub.deep"},
        "pkg.b": {"pkg.sub", "pkg.sub.deep"},
        "pkg.c": {"pkg.sub"},
    }


def test_a_package_is_no_edge_from_its_own_modules_unless_they_read_its_names(ig, tmp_path):
    scan = _scan(
        ig,
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/sub/__init__.py": "LIMIT = 4\nfrom . import x, y\n",
            "pkg/sub/x.py": "import pkg.sub\nfrom .y import f\nfrom .. import sub\n",
            "pkg/sub/y.py": "from . import LIMIT\n\ndef f(): pass\n",
        },
    )
    edges = {m: set(t) for m, t in scan.graph.items() if t}
    assert edges == {
        "pkg.sub": {"pkg.sub.x", "pkg.sub.y"},
        "pkg.sub.x": {"pkg.sub.y"},
        "pkg.sub.y": {"pkg.sub"},  # LIMIT must be bound before sub/__init__ imports y
    }
    assert ig.find_cycles(scan.graph) == [
        ["pkg.sub", "pkg.sub.x", "pkg.sub.y", "pkg.sub"],
        ["pkg.sub", "pkg.sub.y", "pkg.sub"],
    ]


def test_function_local_and_type_checking_imports_are_listed_not_edges(ig, tmp_path):
    scan = _scan(
        ig,
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/a.py": """\
            from typing import TYPE_CHECKING

            import numpy

            if TYPE_CHECKING:
                from .b import B
            else:
                from .c import C


            class K:
                from .d import D  # a class body runs at import time

                def m(self):
                    from .b import f  # b imports a
                    return f

            def g():
                # b imports a
                from . import b

                from .c import (
                    h,
                )
                import numpy as np
                return b, h, np
            """,
            "pkg/b.py": "from .a import K\ndef f(): pass\n",
            "pkg/c.py": "C = h = 1\n",
            "pkg/d.py": "D = 1\n",
        },
    )
    assert set(scan.graph["pkg.a"]) == {"pkg.c", "pkg.d"}
    assert ig.find_cycles(scan.graph) == []
    local = [(i.site.line, i.function, i.targets, i.commented) for i in scan.local]
    assert local == [
        (15, "K.m", ("pkg.b",), True),
        (20, "g", ("pkg.b",), True),
        (22, "g", ("pkg.c",), False),
    ]


def test_cycles_are_reported_as_chains(ig, tmp_path):
    scan = _scan(
        ig,
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/a.py": "from . import b\n",
            "pkg/b.py": "from .c import x\n",
            "pkg/c.py": "import pkg.a\nx = 1\n",
            "pkg/d.py": "from . import a\n",  # imports the cycle but is not part of it
        },
    )
    cycles = ig.find_cycles(scan.graph)
    assert cycles == [["pkg.a", "pkg.b", "pkg.c", "pkg.a"]]
    assert ig.format_cycle(scan.graph, cycles[0]).splitlines() == [
        "pkg.a -> pkg.b -> pkg.c -> pkg.a",
        "    pkg/a.py:1: from . import b",
        "    pkg/b.py:1: from .c import x",
        "    pkg/c.py:1: import pkg.a",
    ]
