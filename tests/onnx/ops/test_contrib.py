"""gpucore.onnx.ops.contrib: ONNX Runtime's com.microsoft QLinear* ops (what its QOperator
quantizer writes) against ONNX Runtime and a float64 numpy reference of their definition
(dequantize, the float op, quantize rounding half to even).

Tolerance: one quantization step. ONNX Runtime evaluates some of these ops with lookup tables or
fixed-point scale ratios, and gpucore with float32 dequantize -> op -> quantize, so a value that
lands next to a rounding boundary may round to the neighbouring step in either.
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx_cases import model, rand

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import helper  # noqa: E402

import gpucore  # noqa: E402
import gpucore.onnx as gx  # noqa: E402
from gpucore.errors import SerializationError  # noqa: E402
from gpucore.onnx import UnsupportedOperator  # noqa: E402

F32 = np.float32
MS = "com.microsoft"
DTYPES = [np.uint8, np.int8]


def _ms_model(op: str, inputs: list, attrs: dict, feeds: tuple, out_dtype):
    """A one-node model of com.microsoft ``op``: inputs at indices in ``feeds`` are graph
    inputs, the others initializers (scales and zero points)."""
    names, graph_in, inits = [], {}, {}
    for i, a in enumerate(inputs):
        name = f"in{i}"
        names.append(name)
        (graph_in if i in feeds else inits)[name] = np.asarray(a)
    node = helper.make_node(op, names, ["out"], domain=MS, **attrs)
    m = model([node], graph_in, {"out": out_dtype}, inits)
    m.opset_import.append(helper.make_opsetid(MS, 1))
    return m, graph_in


def _run(m, feeds: dict, device: str = "cpu"):
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(m.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    want = sess.run(None, feeds)[0]
    cm = gx.load(m.SerializeToString(), device=device)
    got = cm.run_arrays([feeds[n] for n in cm.input_names])[0]
    return got, want


def _q8(dtype, shape, seed):
    info = np.iinfo(dtype)
    return np.random.default_rng(seed).integers(info.min, info.max + 1, shape).astype(dtype)


def _dq(q, s, z):
    return (q.astype(np.float64) - float(z)) * float(s)


def _quant(y, s, z, dtype):
    info = np.iinfo(dtype)
    return np.clip(np.rint(y / float(s)) + float(z), info.min, info.max).astype(dtype)


def _within_a_step(got, want, ref):
    assert got.dtype == want.dtype and got.shape == want.shape, (got.shape, want.shape)
    g = got.astype(np.int32)
    assert np.abs(g - want.astype(np.int32)).max() <= 1
    assert np.abs(g - ref.astype(np.int32)).max() <= 1
    assert np.mean(g == ref.astype(np.int32)) > 0.95  # off by one only at rounding boundaries


def _scalars(dtype, s, z):
    return [np.array(s, F32), np.array(z, dtype)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", ["QLinearAdd", "QLinearMul"])
def test_binary_broadcasts(op, dtype):
    a, b = _q8(dtype, (2, 3, 4, 5), 0), _q8(dtype, (3, 1, 5), 1)
    za, zb, zc = (3, -7, 5) if dtype == np.int8 else (130, 120, 128)
    sc = 0.05 if op == "QLinearAdd" else 0.3
    ins = [a, *_scalars(dtype, 0.02, za), b, *_scalars(dtype, 0.03, zb), *_scalars(dtype, sc, zc)]
    m, feeds = _ms_model(op, ins, {}, (0, 3), dtype)
    got, want = _run(m, feeds)
    fa, fb = _dq(a, 0.02, za), _dq(b, 0.03, zb)
    ref = _quant(fa + fb if op == "QLinearAdd" else fa * fb, sc, zc, dtype)
    _within_a_step(got, want, ref)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", ["QLinearSigmoid", "QLinearLeakyRelu"])
def test_unary(op, dtype):
    x = _q8(dtype, (4, 64), 2)
    zx = 0 if dtype == np.int8 else 128
    attrs = {"alpha": 0.2} if op == "QLinearLeakyRelu" else {}
    zy = (-128 if dtype == np.int8 else 0) if op == "QLinearSigmoid" else zx
    sy = 1 / 256 if op == "QLinearSigmoid" else 0.05
    ins = [x, *_scalars(dtype, 0.05, zx), *_scalars(dtype, sy, zy)]
    m, feeds = _ms_model(op, ins, attrs, (0,), dtype)
    got, want = _run(m, feeds)
    f = _dq(x, 0.05, zx)
    y = 1 / (1 + np.exp(-f)) if op == "QLinearSigmoid" else np.where(f >= 0, f, 0.2 * f)
    _within_a_step(got, want, _quant(y, sy, zy, dtype))


def test_leaky_relu_alpha_defaults_to_a_hundredth():
    x = _q8(np.uint8, (3, 50), 3)
    ins = [x, *_scalars(np.uint8, 0.1, 200), *_scalars(np.uint8, 0.01, 250)]
    m, feeds = _ms_model("QLinearLeakyRelu", ins, {}, (0,), np.uint8)
    got, want = _run(m, feeds)
    f = _dq(x, 0.1, 200)
    _within_a_step(got, want, _quant(np.where(f >= 0, f, 0.01 * f), 0.01, 250, np.uint8))


def _avg_ref(f, k, s, p, include):
    n, c, h, w = f.shape
    fp = np.pad(f, ((0, 0), (0, 0), (p, p), (p, p)))
    ones = np.pad(np.ones((h, w)), p)
    oh, ow = (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
    out = np.empty((n, c, oh, ow))
    for i in range(oh):
        for j in range(ow):
            win = fp[:, :, i * s : i * s + k, j * s : j * s + k].sum(axis=(2, 3))
            cnt = k * k if include else ones[i * s : i * s + k, j * s : j * s + k].sum()
            out[:, :, i, j] = win / cnt
    return out


@pytest.mark.parametrize("channels_last", [0, 1])
@pytest.mark.parametrize("dtype", DTYPES)
def test_average_pools(dtype, channels_last):
    x = _q8(dtype, (2, 3, 7, 6), 4)
    zx, zy = (5, -3) if dtype == np.int8 else (125, 131)
    scal = [*_scalars(dtype, 0.04, zx), *_scalars(dtype, 0.03, zy)]
    xin = x.transpose(0, 2, 3, 1).copy() if channels_last else x
    back = (lambda y: y.transpose(0, 2, 3, 1)) if channels_last else (lambda y: y)
    f = _dq(x, 0.04, zx)
    m, feeds = _ms_model("QLinearGlobalAveragePool", [xin, *scal],
                         {"channels_last": channels_last}, (0,), dtype)  # fmt: skip
    got, want = _run(m, feeds)
    _within_a_step(got, want, back(_quant(f.mean(axis=(2, 3), keepdims=True), 0.03, zy, dtype)))
    for include in (0, 1):
        attrs = {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1],
                 "count_include_pad": include, "channels_last": channels_last}  # fmt: skip
        m, feeds = _ms_model("QLinearAveragePool", [xin, *scal], attrs, (0,), dtype)
        got, want = _run(m, feeds)
        ref = _quant(_avg_ref(f, 3, 2, 1, include), 0.03, zy, dtype)
        _within_a_step(got, want, back(ref))


@pytest.mark.parametrize("dtype", DTYPES)
def test_concat_requantizes_each_input(dtype):
    a, b, c = _q8(dtype, (2, 3, 4), 5), _q8(dtype, (2, 5, 4), 6), _q8(dtype, (2, 1, 4), 7)
    z = [3, 10, -20, 3] if dtype == np.int8 else [128, 100, 140, 128]
    s = [0.05, 0.02, 0.07, 0.05]  # the last input has the output's parameters: copied
    ins = [*_scalars(dtype, s[0], z[0]), a, *_scalars(dtype, s[1], z[1]),
           b, *_scalars(dtype, s[2], z[2]), c, *_scalars(dtype, s[3], z[3])]  # fmt: skip
    m, feeds = _ms_model("QLinearConcat", ins, {"axis": 1}, (2, 5, 8), dtype)
    got, want = _run(m, feeds)
    f = np.concatenate([_dq(a, s[1], z[1]), _dq(b, s[2], z[2]), _dq(c, s[3], z[3])], axis=1)
    _within_a_step(got, want, _quant(f, s[0], z[0], dtype))
    np.testing.assert_array_equal(got[:, 8:], c)


@pytest.mark.parametrize("opset", [12, 13])
@pytest.mark.parametrize("dtype", DTYPES)
def test_softmax_with_the_replaced_opsets_semantics(dtype, opset):
    x = _q8(dtype, (2, 3, 8), 8)
    zx = 0 if dtype == np.int8 else 128
    zy = -128 if dtype == np.int8 else 0
    ins = [x, *_scalars(dtype, 0.1, zx), *_scalars(dtype, 1 / 256, zy)]
    m, feeds = _ms_model("QLinearSoftmax", ins, {"axis": 1, "opset": opset}, (0,), dtype)
    got, want = _run(m, feeds)
    f = _dq(x, 0.1, zx)
    if opset < 13:  # over the input flattened to [2, 24]
        e = np.exp(f - f.max(axis=(1, 2), keepdims=True))
        y = e / e.sum(axis=(1, 2), keepdims=True)
    else:
        e = np.exp(f - f.max(axis=1, keepdims=True))
        y = e / e.sum(axis=1, keepdims=True)
    _within_a_step(got, want, _quant(y, 1 / 256, zy, dtype))


def test_missing_required_attributes_and_unknown_ops_are_named():
    a = _q8(np.uint8, (2, 3), 9)
    ins = [*_scalars(np.uint8, 0.1, 128), a, *_scalars(np.uint8, 0.1, 128)]
    m, _ = _ms_model("QLinearConcat", ins, {}, (2,), np.uint8)
    with pytest.raises(SerializationError, match="QLinearConcat.*'axis' is missing"):
        gx.load(m.SerializeToString())
    ins = [a, *_scalars(np.uint8, 0.1, 128), *_scalars(np.uint8, 1 / 256, 0)]
    m, _ = _ms_model("QLinearSoftmax", ins, {"axis": -1}, (0,), np.uint8)
    with pytest.raises(SerializationError, match="QLinearSoftmax.*'opset' is missing"):
        gx.load(m.SerializeToString())
    m, _ = _ms_model("QLinearReduceMean", ins, {}, (0,), np.uint8)
    with pytest.raises(UnsupportedOperator, match="QLinearReduceMean.*QLinearSoftmax"):
        gx.load(m.SerializeToString())
    ins[0] = _q8(np.uint8, (2, 3, 4), 9)
    m, _ = _ms_model("QLinearAveragePool", ins, {"kernel_shape": [1], "foo": 1}, (0,), np.uint8)
    with pytest.raises(UnsupportedOperator, match="attribute foo=1"):
        gx.load(m.SerializeToString())


# ------------------------------------------------------- a model ONNX Runtime quantized itself
def _float_model():
    rng = np.random.default_rng(0)

    def init(name, shape, s):
        return onnx.numpy_helper.from_array((rng.standard_normal(shape) * s).astype(F32), name)

    mk = helper.make_node
    inits = [init("w1", (8, 3, 3, 3), 0.3), init("b1", (8,), 0.1), init("w2", (8, 8, 3, 3), 0.2),
             init("b2", (8,), 0.1), init("wf", (10, 16), 0.1), init("bf", (10,), 0.1),
             init("m", (1, 8, 1, 1), 0.5)]  # fmt: skip
    nodes = [
        mk("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        mk("Relu", ["c1"], ["r1"]),
        mk("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]),
        mk("Add", ["c2", "r1"], ["a"]),
        mk("Mul", ["a", "m"], ["mm"]),
        mk("Sigmoid", ["mm"], ["s"]),
        mk("LeakyRelu", ["mm"], ["lr"], alpha=0.1),
        mk("AveragePool", ["lr"], ["ap"], kernel_shape=[2, 2], strides=[2, 2]),
        mk("GlobalAveragePool", ["s"], ["g1"]),
        mk("GlobalAveragePool", ["ap"], ["g2"]),
        mk("Concat", ["g1", "g2"], ["cc"], axis=1),
        mk("Flatten", ["cc"], ["f"]),
        mk("Gemm", ["f", "wf", "bf"], ["z"], transB=1),
        mk("Softmax", ["z"], ["y"], axis=-1),
    ]
    tp = onnx.TensorProto.FLOAT
    g = helper.make_graph(nodes, "qops", [helper.make_tensor_value_info("x", tp, ["N", 3, 8, 8])],
                          [helper.make_tensor_value_info("y", tp, ["N", 10])], inits)  # fmt: skip
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


@pytest.fixture(scope="module", params=["QUInt8", "QInt8"])
def ort_qoperator_model(request, tmp_path_factory):
    quant = pytest.importorskip("onnxruntime.quantization")

    class Batches(quant.CalibrationDataReader):
        def __init__(self):
            rng = np.random.default_rng(1)
            self.it = iter([{"x": rng.standard_normal((4, 3, 8, 8)).astype(F32)} for _ in "ab"])

        def get_next(self):
            return next(self.it, None)

    d = tmp_path_factory.mktemp("contrib")
    src, dst = d / "float.onnx", d / f"q_{request.param}.onnx"
    onnx.save(_float_model(), str(src))
    quant.quantize_static(str(src), str(dst), Batches(), quant_format=quant.QuantFormat.QOperator,
                          per_channel=True, activation_type=getattr(quant.QuantType, request.param),
                          weight_type=quant.QuantType.QInt8)  # fmt: skip
    return str(dst)


def test_an_onnxruntime_qoperator_model_runs_on_the_int8_kernels(ort_qoperator_model):
    ops = {n.op_type for n in onnx.load(ort_qoperator_model).graph.node}
    assert {"QLinearAdd", "QLinearMul", "QLinearSigmoid", "QLinearLeakyRelu", "QLinearConcat",
            "QLinearAveragePool", "QLinearGlobalAveragePool", "QLinearSoftmax"} <= ops  # fmt: skip
    x = np.random.default_rng(3).standard_normal((5, 3, 8, 8)).astype(F32)
    sess = ort.InferenceSession(ort_qoperator_model, providers=["CPUExecutionProvider"])
    want = sess.run(None, {"x": x})[0]
    cm = gx.load(ort_qoperator_model)
    got = cm(gpucore.from_numpy(x)).numpy()
    np.testing.assert_allclose(got, want, rtol=0, atol=1.001 / 256)  # softmax's output step
    graph = {n.op for ex in cm.executors() for n in ex.plan.graph.nodes}
    assert "qconv2d" in graph and "conv2d" not in graph


def test_vulkan_agrees_with_the_cpu(ort_qoperator_model, vulkan):
    x = rand(2, 3, 8, 8, seed=4)
    on_cpu = gx.load(ort_qoperator_model)(gpucore.from_numpy(x)).numpy()
    cm = gx.load(ort_qoperator_model, device="vulkan")
    on_vulkan = cm(gpucore.from_numpy(x)).numpy()
    np.testing.assert_allclose(on_vulkan, on_cpu, rtol=0, atol=1.001 / 256)
