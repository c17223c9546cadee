"""gpucore.runtime.passes.dynamic_linear alone: fuse_traced_dynamic_linear turns the traced
activation quantization of a quantize_dynamic Linear (gpucore/quantization/traced.py) plus its
qlinear_dynamic into one float-input qlinear_dynamic with the graph's bits before the pass
(compiled and interpreted; eager's too), and leaves look-alikes alone; fuse_dynamic_linear_relu
moves a relu into the epilogue of either form, -0.0 and NaN as gpucore's relu."""

from __future__ import annotations

import numpy as np
import pytest
from pass_checks import traced
from runtime_models import run_graph

import gpucore as gc
from gpucore import nn
from gpucore.quantization import quantize_dynamic
from gpucore.quantization import traced as qt
from gpucore.runtime.capture.trace import apply_runtime_op
from gpucore.runtime.passes.dynamic_linear import (
    fuse_dynamic_linear_relu,
    fuse_traced_dynamic_linear,
)

F32 = np.float32
R = np.random.default_rng(11)


def _model(relu=True, seed=0):
    gc.manual_seed(seed)
    layers = [nn.Linear(12, 20), nn.ReLU(), nn.Linear(20, 5)] if relu else [nn.Linear(12, 5)]
    return quantize_dynamic(nn.Sequential(*layers), {nn.Linear})


def _inputs(shape):
    x = R.standard_normal(shape).astype(F32)
    return [x, x * 300, np.abs(x), -np.abs(x) - 1, np.zeros_like(x), x * 1e-30]


def _same_outputs(before, after, shape, executors=("interpreted", "compiled")):
    for x in _inputs(shape):
        for ex in executors:
            want = run_graph(before, [x], ex)
            got = run_graph(after, [x], ex)
            for a, b in zip(got, want):
                assert a.dtype == b.dtype and a.tobytes() == b.tobytes(), (ex, x)


@pytest.mark.parametrize("shape", [(4, 12), (2, 3, 12)], ids=["2d", "3d"])
def test_fuses_each_traced_layer_into_one_node_with_the_same_bits(shape):
    model = _model()
    before = traced(model, np.zeros(shape, F32))
    after = before.copy()
    assert fuse_traced_dynamic_linear(after)
    after.validate()
    ops = after.op_counts()
    assert ops["qlinear_dynamic"] == 2, ops
    for gone in ("amin", "amax", "round", "clamp", "to_dtype", "div"):
        assert gone not in ops, ops
    fused = [n for n in after.nodes if n.op == "qlinear_dynamic"]
    assert all(after.tensors[n.inputs[0]].dtype is gc.float32 for n in fused)
    _same_outputs(before, after, shape)
    for x in _inputs(shape):  # and the eager model's
        with gc.no_grad():
            want = model(gc.tensor(x)).numpy()
        assert run_graph(after, [x], "compiled")[0].tobytes() == want.tobytes()
    assert not fuse_traced_dynamic_linear(after)  # nothing left to fuse


def _variant(**change):
    """A traced dynamic Linear whose activation quantization differs from the layer's in one
    constant or op (``change``): the pass must not take it."""
    lin = _model(relu=False)[0]
    w, ws = lin._w, gc.from_numpy(lin._scale.numpy().astype(F32))

    def fn(x):
        zero = qt._f32(0.0)
        lo = x.amin().minimum(zero)
        hi = x.amax().maximum(zero)
        levels = qt._f32(change.get("levels", 255.0))
        scale = ((hi - lo) / levels).maximum(qt._f32(change.get("eps", qt._EPS)))
        zp = (lo / scale).round().neg().clamp(0.0, 255.0)
        inv = qt._f32(1.0) / scale
        y = x * inv + zp
        y = y.floor() if change.get("floor") else y.round()
        q = y.clamp(0.0, 255.0).to(gc.uint8)
        ins = [q, w, scale, zp.to(gc.uint8), ws]
        return apply_runtime_op("qlinear_dynamic", ins, {})

    return fn


def test_takes_the_hand_written_pattern_and_leaves_look_alikes():
    x = R.standard_normal((3, 12)).astype(F32)
    g = traced(_variant(), x)
    assert fuse_traced_dynamic_linear(g)  # the same ops written out: fused
    for change in ({"levels": 254.0}, {"eps": 1e-6}, {"floor": True}):
        g = traced(_variant(**change), x)
        assert not fuse_traced_dynamic_linear(g), change


def test_nan_and_inf_inputs_give_nan():
    """The eager layer refuses them; the fused node gives NaN everywhere (documented)."""
    g = traced(_model(relu=False), np.zeros((2, 12), F32))
    fuse_traced_dynamic_linear(g)
    for bad in (np.nan, np.inf, -np.inf):
        x = R.standard_normal((2, 12)).astype(F32)
        x[1, 3] = bad
        assert np.isnan(run_graph(g, [x], "compiled")[0]).all()


def test_a_finite_input_whose_range_overflows_float32_gives_nan_and_eager_says_why():
    """3e38 - (-3e38) is inf in float32: no finite scale. Eager raises naming the overflow;
    the fused node gives NaN everywhere, as for inf and NaN."""
    q = _model(relu=False)
    g = traced(q, np.zeros((2, 12), F32))
    fuse_traced_dynamic_linear(g)
    x = R.standard_normal((2, 12)).astype(F32)
    x[0, 0], x[1, 5] = 3e38, -3e38
    for executor in ("compiled", "interpreted"):
        assert np.isnan(run_graph(g, [x], executor)[0]).all(), executor
    with pytest.raises(ValueError, match="overflows float32"), gc.no_grad():
        q(gc.tensor(x))


def test_relu_moves_into_the_epilogue():
    shape = (4, 12)
    before = traced(_model(), np.zeros(shape, F32))
    fuse_traced_dynamic_linear(before)
    from gpucore.runtime.passes.cleanup import eliminate_dead_code  # noqa: PLC0415
    from gpucore.runtime.passes.views import compose_views, sink_views  # noqa: PLC0415

    for p in (compose_views, sink_views, eliminate_dead_code):  # the relu reads the product
        p(before)
    after = before.copy()
    assert fuse_dynamic_linear_relu(after)
    after.validate()
    ops = after.op_counts()
    assert "relu" not in ops and ops["qlinear_dynamic"] == 2, ops
    assert [n.attrs["relu"] for n in after.order() if n.op == "qlinear_dynamic"] == [True, False]
    _same_outputs(before, after, shape)
    assert not fuse_dynamic_linear_relu(after)


def test_relu_of_the_onnx_form_and_its_negative_zero():
    """qlinear_dynamic(a, w, a_scale, a_zero_point, w_scales) with products that underflow to
    -0.0: relu(·) gives +0.0, so does the fused epilogue; NaN stays NaN."""
    w = gc.from_numpy(R.integers(-127, 128, (7, 12), dtype=np.int8))
    ws = gc.from_numpy(np.full(7, 1e-30, F32))

    def fn(x):
        q = [
            apply_runtime_op("dynamic_quantize_linear", [x], {"output_index": i}) for i in range(3)
        ]
        tiny = q[1] * qt._f32(1e-20)
        return gc.relu(apply_runtime_op("qlinear_dynamic", [q[0], w, tiny, q[2], ws], {}))

    x = R.standard_normal((3, 12)).astype(F32)
    before = traced(fn, x)
    after = before.copy()
    assert fuse_dynamic_linear_relu(after) and "relu" not in after.op_counts()
    for v in (x, np.where(x > 1, np.nan, x).astype(F32)):
        for ex in ("interpreted", "compiled"):
            got, want = run_graph(after, [v], ex)[0], run_graph(before, [v], ex)[0]
            assert got.tobytes() == want.tobytes()
    pre = run_graph(before.copy(), [x])[0]
    assert (pre == 0).any() and not np.signbit(pre[pre == 0]).any()


def test_relu_stays_when_the_product_has_another_reader():
    lin = _model(relu=False)[0]
    w, ws = lin._w, gc.from_numpy(lin._scale.numpy().astype(F32))

    def fn(x, both):
        y = apply_runtime_op("qlinear_dynamic", [x, w, ws], {})
        return (gc.relu(y), y) if both else gc.relu(y)

    x = np.zeros((2, 12), F32)
    assert fuse_dynamic_linear_relu(traced(lambda v: fn(v, False), x))
    assert not fuse_dynamic_linear_relu(traced(lambda v: fn(v, True), x))
