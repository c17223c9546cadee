"""export_dot writes a Graphviz DOT file naming each backward node, parsed minimally here."""

from __future__ import annotations

import re

import gpucore as gc
from gpucore.autograd import export_dot

_NODE = re.compile(r'^\s*(\w+)\s*\[label="([^"]*)"')
_EDGE = re.compile(r"^\s*(\w+)\s*->\s*(\w+)")


def parse_dot(text: str):
    """(labels by node id, list of (src, dst) edges); asserts the overall digraph structure."""
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    assert lines[0].startswith("digraph") and lines[0].rstrip().endswith("{")
    assert lines[-1].strip() == "}"
    assert text.count("{") == text.count("}")
    labels, edges = {}, []
    for ln in lines[1:-1]:
        assert ln.rstrip().endswith(";"), ln
        e = _EDGE.match(ln)
        if e:
            edges.append((e.group(1), e.group(2)))
            continue
        m = _NODE.match(ln)
        if m:
            labels[m.group(1)] = m.group(2)
    return labels, edges


def test_export_dot_names_ops_and_edges(tmp_path):
    x = gc.tensor([1.0, 2.0, 3.0], requires_grad=True)
    w = gc.tensor([0.5, 0.5, 0.5], requires_grad=True)
    y = (x.exp() * w).sum()
    path = tmp_path / "g.dot"
    text = export_dot(y, path)
    assert path.read_text().strip() == text.strip()
    labels, edges = parse_dot(path.read_text())
    by_label = {}
    for nid, lab in labels.items():
        by_label.setdefault(re.match(r"\w+", lab).group(0), []).append(nid)
    expected = {"SumBackward", "MulBackward", "ExpBackward", "AccumulateGrad", "output"}
    assert set(by_label) >= expected
    assert len(by_label["AccumulateGrad"]) == 2  # x and w, each once
    assert all("leaf (3,) float32" in labels[n] for n in by_label["AccumulateGrad"])
    assert all(a in labels and b in labels for a, b in edges), "edge to an undeclared node"
    (mul,) = by_label["MulBackward"]
    (exp,) = by_label["ExpBackward"]
    (s,) = by_label["SumBackward"]
    assert (exp, mul) in edges and (mul, s) in edges
    # exactly one node feeds the output, and it is the sum
    assert [a for a, b in edges if labels[b].startswith("output")] == [s]
    # every leaf has an edge into the op that used it
    assert all(any(a == leaf for a, _ in edges) for leaf in by_label["AccumulateGrad"])


def test_export_dot_shared_subgraph_listed_once(tmp_path):
    x = gc.tensor([1.0, 2.0], requires_grad=True)
    a = x * 2
    y = (a * a + a).sum()
    labels, edges = parse_dot(export_dot(y, tmp_path / "d.dot"))
    # a's MulBackward and the leaf appear once even though a is used three times
    assert sum(1 for lab in labels.values() if lab.startswith("AccumulateGrad")) == 1
    assert sum(1 for lab in labels.values() if lab == "MulBackward") == 2  # x*2 and a*a
    ids = set(labels)
    assert len(ids) == len(labels)


def test_export_dot_of_leaf_and_constant(tmp_path):
    x = gc.tensor([1.0], requires_grad=True)
    labels, edges = parse_dot(export_dot(x, tmp_path / "l.dot"))
    assert any(lab.startswith("output") for lab in labels.values())
    assert edges == []
    labels, edges = parse_dot(export_dot(gc.ones(2), str(tmp_path / "c.dot")))
    assert edges == []


def test_export_dot_with_accumulate_grad_name():
    from gpucore.autograd.dot import to_dot
    from gpucore.autograd.graph import accumulate_node

    x = gc.tensor([1.0], requires_grad=True)
    assert accumulate_node(x).name() == "AccumulateGrad"
    assert "MulBackward" in to_dot(x * 3)


def test_graphviz_accepts_output(tmp_path):
    import shutil
    import subprocess

    import pytest

    dot = shutil.which("dot")
    if dot is None:
        pytest.skip("graphviz 'dot' is not installed")
    x = gc.tensor([1.0, 2.0], requires_grad=True)
    export_dot((x.tanh() * x).sum(), tmp_path / "g.dot")
    subprocess.run(
        [dot, "-Tsvg", str(tmp_path / "g.dot"), "-o", str(tmp_path / "g.svg")], check=True
    )
    assert "TanhBackward" in (tmp_path / "g.svg").read_text()
