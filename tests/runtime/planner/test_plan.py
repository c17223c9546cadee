"""gpucore.runtime.planner: lifetimes, aliases, in-place reuse and first-fit offsets, checked as
properties over random graphs (no two tensors live at once share bytes; in place only where
the input dies; the planned run equals a reference evaluation)."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from runtime_models import run_graph

from gpucore import float32
from gpucore.runtime.ir.graph import Graph
from gpucore.runtime.ir.ops import op_info
from gpucore.runtime.planner.order import memory_order
from gpucore.runtime.planner.plan import ALIGN, plan

SHAPE = (4, 6)
VIEWS = {  # a reshape that aliases, a transpose that must be copied for a unary reader
    "reshape": ("strided", {"shape": (6, 4), "strides": (4, 1), "offset": 0}, (6, 4)),
    "transpose": ("strided", {"shape": (6, 4), "strides": (1, 6), "offset": 0}, (6, 4)),
}


@st.composite
def graphs(draw):
    g = Graph()
    names = [g.add_input(f"x{i}", SHAPE, float32) for i in range(draw(st.integers(1, 2)))]
    shapes = {n: SHAPE for n in names}
    for _ in range(draw(st.integers(1, 14))):
        kind = draw(st.sampled_from(["unary", "binary", "view"]))
        a = draw(st.sampled_from(names))
        if kind == "unary":
            node = g.add_node(
                draw(st.sampled_from(["relu", "neg", "exp"])), [a], shapes[a], float32
            )
        elif kind == "binary":
            same = [n for n in names if shapes[n] == shapes[a]]
            b = draw(st.sampled_from(same))
            node = g.add_node(draw(st.sampled_from(["add", "mul"])), [a, b], shapes[a], float32)
        else:
            if shapes[a] != SHAPE:
                continue
            op, attrs, shape = VIEWS[draw(st.sampled_from(sorted(VIEWS)))]
            node = g.add_node(op, [a], shape, float32, dict(attrs))
        names.append(node.output)
        shapes[node.output] = g.tensors[node.output].shape
    produced = [n for n in names if n in g.producer]
    outs = draw(st.lists(st.sampled_from(produced), min_size=1, max_size=3, unique=True))
    g.outputs = outs
    return g


def reference(g: Graph, inputs: list) -> list:
    env = dict(zip(g.inputs, inputs))
    for node in g.order():
        dtypes = [g.tensors[n].dtype for n in node.inputs]
        env[node.output] = op_info(node.op).evaluate(
            [env[n] for n in node.inputs], node.attrs, dtypes
        )
    return [env[n] for n in g.outputs]


@settings(max_examples=150, deadline=None)
@given(graphs())
def test_live_tensors_never_share_bytes(g):
    p = plan(g)
    roots = sorted(p.nbytes)
    for i, a in enumerate(roots):
        assert p.offset[a] % ALIGN == 0
        assert p.offset[a] + p.nbytes[a] <= p.arena_bytes
        for b in roots[i + 1 :]:
            (fa, la), (fb, lb) = p.lifetime[a], p.lifetime[b]
            if fa <= lb and fb <= la and p.nbytes[a] and p.nbytes[b]:
                apart = (
                    p.offset[a] + p.nbytes[a] <= p.offset[b]
                    or p.offset[b] + p.nbytes[b] <= p.offset[a]
                )
                assert apart, (a, b, p.lifetime[a], p.lifetime[b])


@settings(max_examples=150, deadline=None)
@given(graphs())
def test_memory_covers_every_read(g):
    p = plan(g)
    step_of = {s.node.output: i for i, s in enumerate(p.steps)}
    for i, s in enumerate(p.steps):
        for name in s.node.inputs:
            first, last = p.lifetime[p.root[name]]
            assert first <= step_of.get(name, -1) <= i <= last
    for name in g.outputs:
        assert p.lifetime[p.root[name]][1] == len(p.steps)


@settings(max_examples=150, deadline=None)
@given(graphs())
def test_in_place_only_where_the_input_dies(g):
    p = plan(g)
    pos = {s.node.output: i for i, s in enumerate(p.steps)}
    for out, victim in p.inplace.items():
        i = pos[out]
        later = [s.node for s in p.steps[i + 1 :]]
        # the tensors whose memory this was before the step (later ones may reuse it again)
        shared = [
            n for n, r in p.root.items() if r == p.root[victim] and n != out and pos.get(n, -1) < i
        ]
        assert not any(n in node.inputs for node in later for n in shared)
        assert victim not in g.outputs


@settings(max_examples=100, deadline=None)
@given(graphs())
def test_planned_runs_equal_the_reference(g):
    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal(SHAPE).astype(np.float32) for _ in g.inputs]
    want = reference(g, inputs)
    for got, ref in zip(run_graph(g, inputs), want):
        np.testing.assert_allclose(got, ref, rtol=1e-6)


def test_memory_order_finishes_branches_before_starting_new_ones():
    g = Graph()
    g.add_input("x", (1024,), float32)
    a = g.add_node("exp", ["x"], (1024,), float32, output="a")
    b = g.add_node("neg", ["x"], (1024,), float32, output="b")
    a2 = g.add_node("relu", ["a"], (1024,), float32, output="a2")
    g.add_node("add", ["a2", "b"], (1024,), float32, output="s")
    g.add_node("add", ["s", "x"], (1024,), float32, output="out")  # x lives to the end
    g.outputs = ["out"]
    order = memory_order(g)
    assert order.index(a2) == order.index(a) + 1  # a dies into a2 before b is made
    assert order.index(b) > order.index(a2)


def test_views_alias_or_copy():
    g = Graph()
    g.add_input("x", SHAPE, float32)
    y = g.add_node("exp", ["x"], SHAPE, float32, output="y")
    r = g.add_node("strided", ["y"], (6, 4), float32, dict(VIEWS["reshape"][1]), output="r")
    t = g.add_node("strided", ["y"], (6, 4), float32, dict(VIEWS["transpose"][1]), output="t")
    g.add_node("add", ["r", "t"], (6, 4), float32, output="out")
    g.outputs = ["out"]
    p = plan(g)
    kinds = {s.node.output: s.kind for s in p.steps}
    assert kinds["r"] == "view" and p.root["r"] == p.root["y"]
    assert kinds["t"] == "view"  # add reads strided operands in place
    assert kinds["out"] == "kernel" and y is g.producer["y"] and r and t
