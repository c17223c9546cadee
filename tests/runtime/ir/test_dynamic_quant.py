"""gpucore.runtime.ir.dynamic_quant: the runtime's dynamic_quantize_linear (one node per output)
and qlinear_dynamic, and qmatmul_integer with its zero point as a tensor: the numpy references
equal onnx.reference's DynamicQuantizeLinear and the unfused float32 ops bit for bit, and the
compiled (one C program) and interpreted executors equal the references, contiguous or strided
input, NaN included."""

from __future__ import annotations

import numpy as np
import pytest

import gpucore
from gpucore.runtime import compile as rt_compile
from gpucore.runtime.capture.trace import apply_runtime_op
from gpucore.runtime.ir.dynamic_quant import dynamic_qparams_ref, qlinear_dynamic_ref
from gpucore.runtime.ir.ops import op_info

F32 = np.float32


def onnx_dql(x):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto as TP  # noqa: PLC0415
    from onnx import helper as h  # noqa: PLC0415
    from onnx.reference import ReferenceEvaluator  # noqa: PLC0415

    outs = [("y", TP.UINT8), ("s", TP.FLOAT), ("z", TP.UINT8)]
    g = h.make_graph(
        [h.make_node("DynamicQuantizeLinear", ["x"], ["y", "s", "z"])],
        "g",
        [h.make_tensor_value_info("x", TP.FLOAT, None)],
        [h.make_tensor_value_info(n, t, None) for n, t in outs],
    )
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 11)], ir_version=onnx.IR_VERSION)
    with np.errstate(all="ignore"):
        return ReferenceEvaluator(m).run(None, {"x": x})


def inputs():
    r = np.random.default_rng(5)
    xs = [
        r.standard_normal((4, 9)).astype(F32),
        np.full((3, 5), -2.0, F32),
        np.abs(r.standard_normal((2, 7))).astype(F32),
        np.zeros((2, 3), F32),
        np.array([[1e-40, -2e-40], [0, 1e-41]], F32),
        np.array([[3e38, -3e38]], F32),
        np.array([[np.inf, 1.0], [-1.0, 2.0]], F32),
    ]
    x = r.standard_normal((5, 6)).astype(F32)
    x[2, 3] = np.nan
    return [*xs, x]


def same(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


@pytest.mark.parametrize("i", range(8))
def test_reference_equals_onnx_reference(i):
    x = inputs()[i]
    want = onnx_dql(x)
    ev = op_info("dynamic_quantize_linear").evaluate
    got = [ev([x], {"output_index": k}) for k in range(3)]
    for g, w in zip(got, want):
        assert same(g, w), (g, w)
    scale, zp = dynamic_qparams_ref(x)
    assert same(scale, want[1]) and same(zp, want[2])


def dql_all(x):
    return tuple(
        apply_runtime_op("dynamic_quantize_linear", [x], {"output_index": k}) for k in range(3)
    )


@pytest.mark.parametrize("executor", ["compiled", "interpreted"])
@pytest.mark.parametrize("strided", [False, True], ids=["contiguous", "transposed"])
def test_executors_equal_onnx_reference(executor, strided):
    def fn(x):
        return dql_all(x.t() if strided else x)

    for x in inputs():
        cm = rt_compile(fn, [gpucore.from_numpy(x)], device="cpu", executor=executor)
        want = onnx_dql(np.ascontiguousarray(x.T) if strided else x)
        for g, w in zip(cm.run_arrays([x]), want):
            assert same(g, w)
        ops = {n.op for ex in cm.executors() for n in ex.plan.graph.nodes}
        assert "dynamic_quantize_linear" in ops
        if executor == "compiled":
            assert all(ex.python_steps == 0 for ex in cm.executors())


def test_qlinear_dynamic_and_qmatmul_integer_with_a_zero_point_tensor():
    """The fused op equals the unfused float32 ops (Cast, Mul by the scale product, Add), and
    both run in C with the zero point and scale a DynamicQuantizeLinear computed."""
    r = np.random.default_rng(2)
    w = r.integers(-127, 128, (6, 9), dtype=np.int8)
    ws = (r.random(6) * 0.01 + 1e-3).astype(F32)
    bias = r.standard_normal(6).astype(F32)
    wt, wst, bt = (gpucore.from_numpy(v) for v in (w, ws, bias))

    def fn(x):
        y, s, z = dql_all(x)
        acc = apply_runtime_op("qmatmul_integer", [y, wt, z], {"a_zero_point": 0})
        out = apply_runtime_op("qlinear_dynamic", [y, wt, s, z, wst, bt], {})
        return acc, out

    x0 = r.standard_normal((4, 9)).astype(F32)
    cm = rt_compile(fn, [gpucore.from_numpy(x0)], device="cpu")
    for x in (x0, x0 * 100, -np.abs(x0)):
        y, s, z = onnx_dql(x)
        acc = (y.astype(np.int64) - z) @ w.astype(np.int64).T
        with np.errstate(all="ignore"):
            unfused = acc.astype(np.int32).astype(F32) * (s * ws) + bias
        got_acc, got = cm.run_arrays([x])
        assert same(got_acc, acc.astype(np.int32))
        assert same(got, unfused)
        assert same(qlinear_dynamic_ref(y, w, s, z, ws, bias), unfused)
    assert all(ex.python_steps == 0 for ex in cm.executors())


def test_bad_attributes_and_inputs_raise():
    from gpucore.runtime.ir.shapes import FUSED_DTYPES, FUSED_SHAPES  # noqa: PLC0415

    with pytest.raises(ValueError, match="output_index"):
        FUSED_SHAPES["dynamic_quantize_linear"]([(2, 3)], {"output_index": 3})
    with pytest.raises(ValueError, match="float32"):
        FUSED_DTYPES["dynamic_quantize_linear"]([gpucore.float64], {"output_index": 0})
    with pytest.raises(ValueError, match="do not fit"):
        FUSED_SHAPES["qlinear_dynamic"]([(2, 3), (4, 5), (), (), (4,)], {})
    with pytest.raises(ValueError, match="a_scale must be one value"):
        FUSED_SHAPES["qlinear_dynamic"]([(2, 5), (4, 5), (2,), (), (4,)], {})
    with pytest.raises(ValueError, match="zero point must be one value"):
        FUSED_SHAPES["qmatmul_integer"]([(2, 5), (4, 5), (3,)], {"a_zero_point": 0})


# ------------------------------------------------- the float-input form (quantize_dynamic's)
def dynamic_layer(k=9, n=6, bias=True, seed=4):
    from gpucore import nn  # noqa: PLC0415
    from gpucore.quantization import quantize_dynamic  # noqa: PLC0415

    gpucore.manual_seed(seed)
    return quantize_dynamic(nn.Sequential(nn.Linear(k, n, bias=bias)), {nn.Linear})[0]


def float_form(layer, relu: bool):
    consts = [layer._w, gpucore.from_numpy(layer._scale.numpy().astype(F32))]
    if layer._bias is not None:
        consts.append(layer._bias)

    def fn(x):
        return apply_runtime_op("qlinear_dynamic", [x, *consts], {"relu": relu})

    return fn


@pytest.mark.parametrize("executor", ["compiled", "interpreted"])
@pytest.mark.parametrize("relu", [False, True])
@pytest.mark.parametrize("bias", [True, False])
def test_float_form_equals_the_eager_dynamic_linear(executor, relu, bias):
    """qlinear_dynamic(x, w, w_scales[, bias]) gives gpucore's eager quantize_dynamic Linear
    (and its relu) bit for bit on every input it takes; NaN everywhere on those it refuses (inf,
    NaN, a range beyond float32)."""
    layer = dynamic_layer(bias=bias)
    fn = float_form(layer, relu)
    x0 = np.random.default_rng(1).standard_normal((4, 9)).astype(F32)
    models: dict = {}

    def run(x):
        if x.shape not in models:
            models[x.shape] = rt_compile(
                fn, [gpucore.from_numpy(x)], device="cpu", executor=executor
            )
        return models[x.shape].run_arrays([x])[0]

    ev = op_info("qlinear_dynamic").evaluate
    consts = [layer._w.numpy(), layer._scale.numpy().astype(F32)]
    consts += [] if layer._bias is None else [layer._bias.numpy()]
    for x in [x0 * 30, *(v for v in inputs() if v.shape[-1] == 9)] + [
        np.pad(v, ((0, 0), (0, 9 - v.shape[1]))) for v in inputs()
    ]:
        got = run(x)
        assert same(ev([x, *consts], {"relu": relu}), got)
        try:
            with gpucore.no_grad():
                want = layer(gpucore.from_numpy(x))
        except ValueError:  # inf or NaN in x, or a range overflowing float32
            assert np.isnan(got).all()
            continue
        want = (gpucore.relu(want) if relu else want).numpy()
        assert same(got, want), x
        if x.shape[0] % 2 == 0:
            assert same(run(x.reshape(-1, 2, 9)), want.reshape(-1, 2, 6))  # [B, T, K]
    if executor == "compiled":
        assert all(ex.python_steps == 0 for cm in models.values() for ex in cm.executors())


def test_float_form_bad_inputs_raise():
    from gpucore.runtime.ir.shapes import FUSED_DTYPES, FUSED_SHAPES  # noqa: PLC0415

    assert FUSED_SHAPES["qlinear_dynamic"]([(2, 5), (4, 5), (4,)], {}) == (2, 4)
    with pytest.raises(ValueError, match="w_scales and bias must be"):
        FUSED_SHAPES["qlinear_dynamic"]([(2, 5), (4, 5), (3,)], {})
    with pytest.raises(ValueError, match="relu must be a bool"):
        FUSED_SHAPES["qlinear_dynamic"]([(2, 5), (4, 5), (4,)], {"relu": 1})
    with pytest.raises(ValueError, match="expects a, w, a_scale"):
        FUSED_SHAPES["qlinear_dynamic"]([(2, 5), (4, 5)], {})
    with pytest.raises(ValueError, match="expects float32, int8, float32"):
        FUSED_DTYPES["qlinear_dynamic"]([gpucore.uint8, gpucore.int8, gpucore.float32], {})
