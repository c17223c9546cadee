"""gpucore.runtime.ir.graph: the IR's rules, kept by every mutation."""

import numpy as np
import pytest

from gpucore import float32
from gpucore.runtime.ir.graph import Graph, GraphError


def small():
    g = Graph()
    g.add_input("x", (2, 3), float32)
    w = g.add_constant(np.ones((3,), np.float32), name="w")
    a = g.add_node("mul", ["x", w], (2, 3), float32, output="a")
    b = g.add_node("relu", ["a"], (2, 3), float32, output="b")
    c = g.add_node("add", ["a", "b"], (2, 3), float32, output="c")
    g.outputs.append("c")
    return g, a, b, c


def test_producers_consumers_and_order():
    g, a, b, c = small()
    assert g.producer["a"] is a and g.readers("a") == [b, c]
    assert g.order() == [a, b, c]
    assert g.inputs == ["x"] and g.is_constant("w") and not g.is_constant("x")
    g.validate()


def test_sole_consumer_rule():
    g, a, b, c = small()
    assert g.sole_consumer("a") is None  # read by b and c
    assert g.sole_consumer("b") is c
    assert g.sole_consumer("c") is None  # a graph output
    sq = g.add_node("mul", ["b", "b"], (2, 3), float32, output="sq")
    g.set_inputs(c, ["a", "a"])
    assert g.sole_consumer("b") is sq  # read twice by one node: still its sole consumer


def test_mutations_keep_indices():
    g, a, b, c = small()
    g.set_input(c, 1, "x")
    assert c not in g.readers("b") and c in g.readers("x")
    g.remove_node(b)
    assert "b" not in g.tensors and "b" not in g.producer
    g.replace_uses("a", "x")
    assert g.readers("a") == [] and g.order() == [a, c]
    g.remove_node(a)
    g.rename("c", "out")
    assert g.outputs == ["out"] and g.producer["out"] is c
    g.validate()


def test_errors():
    g, a, b, c = small()
    with pytest.raises(GraphError, match="still used"):
        g.remove_node(a)
    with pytest.raises(GraphError, match="not in the graph"):
        g.add_node("relu", ["nope"], (1,), float32)
    with pytest.raises(GraphError, match="defined twice"):
        g.add_input("x", (1,), float32)
    with pytest.raises(GraphError, match="taken"):
        g.rename("a", "b")
    c.inputs.append("ghost")  # a broken graph (bypassing the methods)
    with pytest.raises(GraphError, match="undefined"):
        g.validate()


def test_cycle_is_refused():
    g, a, b, c = small()
    g.set_input(a, 0, "c")
    with pytest.raises(GraphError, match="cycle"):
        g.order()


def test_copy_is_independent():
    g, a, b, c = small()
    h = g.copy()
    h.remove_node(h.producer["c"]) if False else None
    h.rename("c", "out")
    assert g.outputs == ["c"] and h.outputs == ["out"]
    assert h.tensors["w"].data is g.tensors["w"].data  # constants are shared, not copied
    assert [n.op for n in h.order()] == ["mul", "relu", "add"]


def test_constants_keep_zero_dims():
    g = Graph()
    name = g.add_constant(np.float32(2.0) * np.ones((), np.float32))
    assert g.tensors[name].shape == () and g.tensors[name].data.shape == ()
