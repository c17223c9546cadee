"""gpucore.runtime.passes.quantize: each static-quantization pass alone on small graphs built
by hand, checked against numpy (the dequantize / quantize formulas written here) and against
the graph before the pass."""

from __future__ import annotations

import math

import numpy as np
import pytest
from runtime_models import rand, run_graph

from gpucore import dtypes as D
from gpucore.runtime.ir.graph import Graph
from gpucore.runtime.passes.cleanup import constant_fold
from gpucore.runtime.passes.quantize import (
    fuse_quantized,
    insert_qdq,
    pool_uint8,
    quantize_weight,
    remove_qdq_pairs,
    sink_dequantize,
)

F = np.float32


def _q(x, s, z):
    return np.clip(np.rint(x.astype(F) * (F(1) / F(s)) + F(z)), 0, 255).astype(np.uint8)


def _dq(q, s, z):
    return (q.astype(F) - F(z)) * F(s)


def _gemm_graph(act="relu", bias=True):
    """y = act(x @ w.T + b): x [4, 6] float, w [5, 6], b [5]."""
    g = Graph()
    x = g.add_input("x", (4, 6), D.float32)
    w = g.add_constant(rand(5, 6, seed=1))
    ins = [x, w] + ([g.add_constant(rand(5, seed=2))] if bias else [])
    attrs = {"trans_a": False, "trans_b": True, "alpha": 1.0, "act": act}
    y = g.add_node("gemm", ins, (4, 5), D.float32, attrs)
    g.outputs = [y.output]
    return g


def test_quantize_weight_is_symmetric_per_channel():
    w = rand(3, 7, seed=3)
    w[1] *= 10
    q, s = quantize_weight(w)
    want_s = np.abs(w).max(axis=1) / F(127)
    np.testing.assert_allclose(s, want_s, rtol=1e-7)
    np.testing.assert_allclose(q, np.rint(w.astype(np.float64) / want_s[:, None]), atol=1)
    assert q.min() >= -127 and q.max() <= 127 and (np.abs(q).max(axis=1) == 127).all()
    assert q.dtype == np.int8 and s.dtype == np.float32
    q1, s1 = quantize_weight(w, per_channel=False)
    assert len(set(s1.tolist())) == 1 and s1[0] == s.max()


def test_insert_qdq_writes_the_qdq_form():
    g = _gemm_graph()
    before = g.copy()
    assert insert_qdq({"x": (0.02, 128)})(g)
    g.validate()
    assert g.op_counts() == {"gemm": 1, "quantize_linear": 1, "dequantize_linear": 2}
    gemm = next(n for n in g.nodes if n.op == "gemm")
    wdq = g.producer[gemm.inputs[1]]
    assert g.tensors[wdq.inputs[0]].dtype is D.int8 and wdq.attrs == {"axis": 0}
    x = rand(4, 6, seed=4)
    xq = _dq(_q(x, 0.02, 128), 0.02, 128)
    wq, s = quantize_weight(before.tensors[before.nodes[0].inputs[1]].data)
    b = before.tensors[before.nodes[0].inputs[2]].data
    want = np.maximum(xq.astype(np.float64) @ (wq * s[:, None]).T.astype(np.float64) + b, 0)
    (got,) = run_graph(g, [x])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    # close to the float graph: the quantization error only
    np.testing.assert_allclose(got, run_graph(before, [x])[0], atol=0.1)


@pytest.mark.parametrize("act", ["gelu", "gelu_tanh", "sigmoid", "tanh"])
def test_insert_qdq_splits_activations_the_int8_epilogue_lacks(act):
    # the float pipeline fuses a transformer FFN's GELU into its gemm; the int8 GEMM's epilogue
    # has only relu, so the activation becomes its own node again and the gemm is quantized
    g = _gemm_graph(act)
    before = g.copy()
    assert insert_qdq({"x": (0.02, 128)})(g)
    g.validate()
    op = "gelu" if act.startswith("gelu") else act
    assert g.op_counts() == {"gemm": 1, op: 1, "quantize_linear": 1, "dequantize_linear": 2}
    gemm = next(n for n in g.nodes if n.op == "gemm")
    assert gemm.attrs["act"] is None
    assert g.outputs == before.outputs and g.producer[g.outputs[0]].op == op
    x = rand(4, 6, seed=4)
    xq = _dq(_q(x, 0.02, 128), 0.02, 128).astype(np.float64)
    wq, s = quantize_weight(before.tensors[before.nodes[0].inputs[1]].data)
    b = before.tensors[before.nodes[0].inputs[2]].data
    z = xq @ (wq * s[:, None]).T.astype(np.float64) + b
    erf = np.vectorize(math.erf)
    want = {
        "gelu": 0.5 * z * (1 + erf(z / math.sqrt(2))),
        "gelu_tanh": 0.5 * z * (1 + np.tanh(math.sqrt(2 / math.pi) * (z + 0.044715 * z**3))),
        "sigmoid": 1 / (1 + np.exp(-z)),
        "tanh": np.tanh(z),
    }[act]
    (got,) = run_graph(g, [x])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert fuse_quantized(g)
    assert g.op_counts() == {"quantize_linear": 1, "qlinear": 1, op: 1}
    np.testing.assert_allclose(run_graph(g, [x])[0], want, rtol=1e-5, atol=1e-5)


def test_insert_qdq_leaves_unobserved_layers_float():
    g = _gemm_graph()
    assert not insert_qdq({})(g)
    assert g.op_counts() == {"gemm": 1}


def _dq_graph(shape, s=0.1, z=3):
    g = Graph()
    q = g.add_input("q", shape, D.uint8)
    dq = g.add_node("dequantize_linear", [q], shape, D.float32, {"scale": s, "zero_point": z})
    return g, dq.output


def test_sink_dequantize_moves_views_and_max_pool_below():
    g, d = _dq_graph((2, 3, 4, 4))
    pool_attrs = {"kernel": (2, 2), "stride": (2, 2), "padding": (0, 0), "dilation": (1, 1)}
    pool_attrs.update(ceil_mode=False, src=(2, 3, 4, 4), output_index=0)
    p = g.add_node("max_pool2d", [d], (2, 3, 2, 2), D.float32, pool_attrs)
    r = g.add_node("view", [p.output], (2, 12), D.float32, {"shape": (2, 12), "src": (2, 3, 2, 2)})
    g.outputs = [r.output]
    q = np.random.default_rng(0).integers(0, 256, (2, 3, 4, 4)).astype(np.uint8)
    (want,) = run_graph(g, [q])
    assert sink_dequantize(g)
    sink_dequantize(g)
    g.validate()
    order = [n.op for n in g.order()]
    assert order == ["qmax_pool2d", "view", "dequantize_linear"], order
    (got,) = run_graph(g, [q])
    np.testing.assert_array_equal(got, want)
    pooled = q.reshape(2, 3, 2, 2, 2, 2).max(axis=(3, 5)).reshape(2, 12)
    np.testing.assert_array_equal(got, _dq(pooled, 0.1, 3))


def test_remove_qdq_pairs_only_with_equal_parameters():
    for s2, z2, removed in ((0.1, 3, True), (0.1, 4, False), (0.2, 3, False)):
        g, d = _dq_graph((5,))
        attrs = {"scale": s2, "zero_point": z2}
        q2 = g.add_node("quantize_linear", [d], (5,), D.uint8, attrs)
        out = g.add_node("dequantize_linear", [q2.output], (5,), D.float32, attrs)
        g.outputs = [out.output]
        x = np.arange(250, 255, dtype=np.uint8)
        (want,) = run_graph(g, [x])
        assert remove_qdq_pairs(g) is removed
        assert ("quantize_linear" in g.op_counts()) is not removed
        (got,) = run_graph(g, [x])
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("act", [None, "relu"])
@pytest.mark.parametrize("requant", [True, False])
def test_fuse_quantized_gemm(act, requant):
    g = _gemm_graph(act=act)
    insert_qdq({"x": (0.02, 128)})(g)
    if requant:
        out = g.outputs[0]
        info = g.tensors[out]
        attrs = {"scale": 0.05, "zero_point": 0 if act else 100}
        q = g.add_node("quantize_linear", [out], info.shape, D.uint8, attrs)
        dq = g.add_node("dequantize_linear", [q.output], info.shape, D.float32, attrs)
        g.outputs = [dq.output]
    x = rand(4, 6, seed=5)
    (unfused,) = run_graph(g, [x])
    assert fuse_quantized(g)
    g.validate()
    counts = g.op_counts()
    assert counts.pop("qlinear") == 1 and "gemm" not in counts
    assert counts == ({"quantize_linear": 1, "dequantize_linear": 1} if requant else
                      {"quantize_linear": 1})  # fmt: skip
    node = next(n for n in g.nodes if n.op == "qlinear")
    assert node.attrs["relu"] is (act == "relu")
    assert (node.attrs["out_scale"] is None) is not requant
    for executor in ("interpreted", "compiled"):
        (got,) = run_graph(g, [x], executor)
        # the fused epilogue rounds once where the QDQ graph rounds twice: one step at most
        step = 0.05 if requant else 1e-5
        np.testing.assert_allclose(got, unfused, atol=step * 1.01, rtol=1e-5)


def test_fuse_quantized_conv_relu_requant():
    g = Graph()
    x = g.add_input("x", (2, 3, 6, 6), D.float32)
    w = g.add_constant(rand(4, 3, 3, 3, seed=6))
    b = g.add_constant(rand(4, seed=7))
    attrs = {"stride": (1, 1), "padding": (1, 1), "dilation": (1, 1)}
    c = g.add_node("conv2d", [x, w, b], (2, 4, 6, 6), D.float32, attrs)
    r = g.add_node("relu", [c.output], (2, 4, 6, 6), D.float32)
    sum_attrs = {"dims": (0, 1, 2, 3), "keepdim": False, "shape": (2, 4, 6, 6)}
    p = g.add_node("sum", [r.output], (), D.float32, sum_attrs)
    g.outputs = [p.output]
    insert_qdq({"x": (0.03, 120), r.output: (0.06, 0)})(g)
    xs = rand(2, 3, 6, 6, seed=8)
    (unfused,) = run_graph(g, [xs])
    assert fuse_quantized(g)
    assert g.op_counts() == {"quantize_linear": 1, "qconv2d": 1, "dequantize_linear": 1, "sum": 1}
    conv = next(n for n in g.nodes if n.op == "qconv2d")
    assert conv.attrs["relu"] and conv.attrs["out_scale"] == 0.06
    (got,) = run_graph(g, [xs])
    np.testing.assert_allclose(got, unfused, atol=0.06 * 2 * 6, rtol=1e-3)


def _onnx_qdq_gemm(axis: int, bias_scale_factor: float):
    """The QDQ form an ONNX model brings: DQ(x) -> gemm(DQ(int8 w) per channel, DQ(int32 b))
    -> Q -> DQ; the weight [5, 6] along axis 0 (trans_b) or [6, 5] along axis 1 (MatMul's)."""
    rng = np.random.default_rng(11)
    g = Graph()
    x = g.add_input("x", (4, 6), D.uint8)
    a = {"scale": 0.02, "zero_point": 7}
    xd = g.add_node("dequantize_linear", [x], (4, 6), D.float32, a)
    wq = rng.integers(-128, 128, (5, 6)).astype(np.int8)
    ws = (rng.random(5) * 0.02 + 0.005).astype(F)
    wq = wq if axis == 0 else np.ascontiguousarray(wq.T)
    w = g.add_node("dequantize_linear", [g.add_constant(wq), g.add_constant(ws)], wq.shape,
                   D.float32, {"axis": axis})  # fmt: skip
    bq = rng.integers(-3000, 3000, 5).astype(np.int32)
    bs = (F(0.02) * ws * F(bias_scale_factor)).astype(F)
    b = g.add_node("dequantize_linear", [g.add_constant(bq), g.add_constant(bs)], (5,),
                   D.float32, {"axis": 0})  # fmt: skip
    attrs = {"trans_a": False, "trans_b": axis == 0, "alpha": 1.0, "act": None}
    y = g.add_node("gemm", [xd.output, w.output, b.output], (4, 5), D.float32, attrs)
    o = {"scale": 0.05, "zero_point": 120, "onnx": True}
    q = g.add_node("quantize_linear", [y.output], (4, 5), D.uint8, o)
    g.outputs = [q.output]
    return g


@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("factor", [1.0, 1.5])
def test_fuse_quantized_onnx_weights_and_int32_bias(axis, factor):
    """Weights dequantized along axis 1 (MatMul's [in, out]) are transposed once; an int32 bias
    whose scale is x_scale * w_scale joins the integer sums (qlinear gets the int32 constant),
    any other dequantized int32 bias becomes float32. Constant folding leaves the dequantized
    weight and bias to the fusion."""
    g = _onnx_qdq_gemm(axis, factor)
    x = np.random.default_rng(12).integers(0, 256, (4, 6)).astype(np.uint8)
    (unfused,) = run_graph(g, [x])
    assert not constant_fold(g)
    assert fuse_quantized(g)
    g.validate()
    assert g.op_counts() == {"qlinear": 1}
    node = g.nodes[0]
    w, bias = g.tensors[node.inputs[1]], g.tensors[node.inputs[3]]
    assert w.shape == (5, 6) and w.dtype is D.int8
    assert bias.dtype is (D.int32 if factor == 1.0 else D.float32)
    for executor in ("interpreted", "compiled"):
        (got,) = run_graph(g, [x], executor)
        if factor == 1.0:  # the same float32 requantization as the float graph's exact sums
            acc = (x.astype(np.int64) - 7) @ (w.data.astype(np.int64).T) + bias.data
            s = (F(0.02) * g.tensors[node.inputs[2]].data) / F(0.05)
            want = np.clip(np.rint(acc.astype(np.int32).astype(F) * s) + 120, 0, 255)
            np.testing.assert_array_equal(got, want.astype(np.uint8))
        assert np.abs(got.astype(int) - unfused.astype(int)).max() <= 1


def test_pool_uint8_pools_the_bytes():
    g = Graph()
    q = g.add_input("q", (2, 3, 4, 4), D.uint8)
    up = g.add_node("to_dtype", [q], (2, 3, 4, 4), D.float32, {"dtype": D.float32})
    pool_attrs = {"kernel": (2, 2), "stride": (2, 2), "padding": (0, 0), "dilation": (1, 1)}
    pool_attrs.update(ceil_mode=False, src=(2, 3, 4, 4), output_index=0)
    p = g.add_node("max_pool2d", [up.output], (2, 3, 2, 2), D.float32, pool_attrs)
    down = g.add_node("to_dtype", [p.output], (2, 3, 2, 2), D.uint8, {"dtype": D.uint8})
    g.outputs = [down.output]
    x = np.random.default_rng(0).integers(0, 256, (2, 3, 4, 4)).astype(np.uint8)
    assert pool_uint8(g)
    assert g.op_counts() == {"qmax_pool2d": 1}
    (got,) = run_graph(g, [x], "compiled")
    np.testing.assert_array_equal(got, x.reshape(2, 3, 2, 2, 2, 2).max(axis=(3, 5)))
