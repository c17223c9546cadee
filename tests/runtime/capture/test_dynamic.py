"""gpucore.runtime.capture.dynamic: one graph for every size of the dynamic axes."""

import numpy as np
import pytest
from runtime_models import block, eager, rand, run_graph

import gpucore
from gpucore.runtime.capture.dynamic import capture, normalize_axes, specialize
from gpucore.runtime.capture.trace import CaptureError
from gpucore.runtime.ir.symbolic import SymInt


def test_axes_argument_forms():
    names = ["x", "mask"]
    assert normalize_axes({"x": {0: "batch"}}, names) == {(0, 0): "batch"}
    assert normalize_axes({1: [0, 2]}, names) == {(1, 0): "mask_0", (1, 2): "mask_2"}
    with pytest.raises(CaptureError, match="not an input name"):
        normalize_axes({"y": [0]}, names)


def test_sizes_become_linear_forms():
    m = block(16)
    g = capture(m, [gpucore.randn(2, 5, 16)], {"x": {0: "batch", 1: "seq"}})
    b, t = SymInt(0, {"batch": 1}), SymInt(0, {"seq": 1})
    assert g.tensors["x"].shape == (b, t, 16)
    flat = [n for n in g.order() if n.op == "view" and len(n.attrs["shape"]) == 2]
    assert flat and all(n.attrs["shape"][0] == SymInt(0, {("batch", "seq"): 1}) for n in flat)
    x = rand(3, 7, 16)
    out = run_graph(specialize(g, {"batch": 3, "seq": 7}), [x])[0]
    np.testing.assert_allclose(out, eager(m, x), rtol=1e-5, atol=1e-6)


def test_specialized_graphs_compute_the_model_at_every_size():
    m = block(16)
    g = capture(m, [gpucore.randn(2, 5, 16)], {"x": {0: "batch"}})
    for batch in (1, 3, 8):
        x = rand(batch, 5, 16, seed=batch)
        out = run_graph(specialize(g, {"batch": batch}), [x])[0]
        np.testing.assert_allclose(out, eager(m, x), rtol=1e-5, atol=1e-6)


def test_sizes_taken_as_constants_are_refused():
    def fn(x):
        return x + gpucore.ones(x.shape[0], 1)  # a constant created from a size

    with pytest.raises(CaptureError, match="constant"):
        capture(fn, [gpucore.randn(3, 4)], {"x": [0]})


def test_size_dependent_floats_and_structure_are_refused():
    with pytest.raises(CaptureError, match="changes with the dynamic sizes"):
        capture(lambda x: x * (1.0 / x.shape[0]), [gpucore.randn(3, 4)], {"x": [0]})

    def branchy(x):
        return x.relu() if x.shape[0] % 2 else x.exp()

    with pytest.raises(CaptureError, match="different ops"):
        capture(branchy, [gpucore.randn(3, 4)], {"x": [0]})


def test_nonlinear_sizes_are_refused():
    def square(x):
        n = x.shape[0]
        return x.reshape(-1).expand(n * n, x.numel())

    with pytest.raises(CaptureError, match="linear"):
        capture(square, [gpucore.randn(2, 2)], {"x": [0]})


def test_symbols_must_agree_across_inputs():
    with pytest.raises(CaptureError, match="sizes 2 and 3"):
        capture(
            lambda a, b: a.sum() + b.sum(),
            [gpucore.ones(2), gpucore.ones(3)],
            {"a": {0: "n"}, "b": {0: "n"}},
        )


def test_shapes_only_capture_solves_the_same_symbolic_graph():
    m = block(16)
    axes = {"x": {0: "batch", 1: "seq"}}
    g = capture(m, [gpucore.randn(2, 5, 16)], axes, shapes_only=True)
    want = capture(m, [gpucore.randn(2, 5, 16)], axes)
    assert [(n.op, n.inputs, n.attrs) for n in g.order()] == [
        (n.op, n.inputs, n.attrs) for n in want.order()
    ]
    assert {k: t.shape for k, t in g.tensors.items()} == {
        k: t.shape for k, t in want.tensors.items()
    }
    x = rand(3, 7, 16)
    out = run_graph(specialize(g, {"batch": 3, "seq": 7}), [x])[0]
    np.testing.assert_allclose(out, eager(m, x), rtol=1e-5, atol=1e-6)
