"""gpucore.onnx.export of a quantize_dynamic model (gpucore/onnx/export_ops.py's qlinear_dynamic
emitter): written as ONNX Runtime's quantize_dynamic writes a MatMul with per-channel weights
(DynamicQuantizeLinear -> MatMulInteger -> Cast -> Mul(a_scale * w_scales) -> Add [-> Relu]),
the int8 weights as uint8 w + 128 with zero points 128, valid under onnx.checker; ONNX Runtime
and onnx.reference run it, gpucore.onnx.load brings it back onto qlinear_dynamic nodes with
onnx.reference's bits, close to the gpucore model (ONNX's DynamicQuantizeLinear picks the
activations' parameters and rounds as ONNX does, not as PyTorch). ONNX Runtime gives
onnx.reference's outputs on every input: its uint8 x int8 kernel on AVX2 without VNNI saturates
the pair sums of vpmaddubsw for full-range int8 weights (PyTorch's per-channel qint8 weights
are full range), its uint8 x uint8 kernel does not."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

import gpucore as gc  # noqa: E402
import gpucore.onnx as gx  # noqa: E402
from gpucore import nn  # noqa: E402
from gpucore.quantization import quantize_dynamic  # noqa: E402

F32 = np.float32


def _model(seed=0):
    gc.manual_seed(seed)
    m = nn.Sequential(nn.Linear(24, 40), nn.ReLU(), nn.Linear(40, 16), nn.ReLU(), nn.Linear(16, 8))
    return quantize_dynamic(m, {nn.Linear})


def _inputs(shape):
    r = np.random.default_rng(3)
    x = r.standard_normal(shape).astype(F32)
    return [x, x * 20, np.abs(x), -np.abs(x)]


def _run_ort(proto, x):
    sess = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {sess.get_inputs()[0].name: x})[0]


@pytest.mark.parametrize("shape", [(5, 24), (2, 3, 24)], ids=["2d", "3d"])
def test_written_as_onnx_runtime_dynamic_quantization(tmp_path, shape):
    from onnx.reference import ReferenceEvaluator  # noqa: PLC0415

    q = _model()
    path = str(tmp_path / "dyn.onnx")
    proto = gx.export(q, (gc.zeros(*shape),), path)
    onnx.checker.check_model(proto)
    ops = [n.op_type for n in proto.graph.node]
    for op, count in (("DynamicQuantizeLinear", 3), ("MatMulInteger", 3), ("Relu", 2)):
        assert ops.count(op) == count, ops
    assert not {"Round", "ReduceMin", "Clip"} & set(ops), ops
    inits = {i.name: onnx.numpy_helper.to_array(i) for i in proto.graph.initializer}
    for node in (n for n in proto.graph.node if n.op_type == "MatMulInteger"):
        w, w_zp = inits[node.input[1]], inits[node.input[3]]
        assert w.dtype == np.uint8 and w_zp.dtype == np.uint8 and w_zp.shape == (w.shape[1],)
        assert (w_zp == 128).all()  # symmetric per-channel int8 weights, shifted by 128
        assert w.min() == 0  # full range: PyTorch's per-channel qint8 weights hold -128
    cm = gx.load(path)
    graph_ops = {s.node.op for ex in cm.executors() for s in ex.plan.steps}
    assert "qlinear_dynamic" in graph_ops and "qmatmul_integer" not in graph_ops, graph_ops
    assert "relu" not in graph_ops, graph_ops  # in the epilogues
    ref = ReferenceEvaluator(proto)
    for x in _inputs(shape):
        with gc.no_grad():
            eager = q(gc.tensor(x)).numpy()
        got = cm(gc.tensor(x)).numpy()
        want = ref.run(None, {proto.graph.input[0].name: x})[0]
        np.testing.assert_array_equal(got, want)  # gpucore runs ONNX's semantics exactly
        scale = np.abs(eager).max()
        _assert_float_rounding(_run_ort(proto, x), want)  # no saturated pairs
        np.testing.assert_allclose(got, eager, atol=2e-2 * scale, rtol=0)
        cos = float((got * eager).sum() / np.linalg.norm(got) / np.linalg.norm(eager))
        assert cos > 0.9995, cos


def test_bias_free_last_layer_and_names(tmp_path):
    gc.manual_seed(1)
    q = quantize_dynamic(nn.Sequential(nn.Linear(12, 6, bias=False)), {nn.Linear})
    proto = gx.export(q, (gc.zeros(3, 12),), input_names=["x"], output_names=["y"])
    ops = [n.op_type for n in proto.graph.node]
    assert "Add" not in ops and ops.count("MatMulInteger") == 1, ops
    x = _inputs((3, 12))[0]
    with gc.no_grad():
        eager = q(gc.tensor(x)).numpy()
    got = gx.load(proto)(gc.tensor(x)).numpy()
    np.testing.assert_allclose(got, eager, atol=2e-2 * np.abs(eager).max())
    _assert_float_rounding(_run_ort(proto, x), got)
    assert [i.name for i in proto.graph.input] == ["x"] and proto.graph.output[0].name == "y"


def _assert_float_rounding(got, want):
    """Equal up to float32 rounding (ONNX Runtime may fuse MatMulInteger -> Cast -> Mul into
    MatMulIntegerToFloat); a saturated pair of products is off by whole quantization steps."""
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6 * float(np.abs(want).max()))


@pytest.mark.parametrize("shape", [(6, 24), (2, 3, 24), (4, 31)], ids=["2d", "3d", "odd_k"])
@pytest.mark.parametrize("relu", [False, True])
def test_onnx_runtime_gives_the_reference_outputs(shape, relu):
    """Inputs whose quantized values reach 0 and 255 against weights holding -128 and 127:
    the products whose pairs overflow int16 (where ONNX Runtime's uint8 x int8 AVX2 kernel
    saturates) are everywhere; the uint8 weights keep ONNX Runtime exact, as onnx.reference
    and gpucore.onnx.load."""
    from onnx.reference import ReferenceEvaluator  # noqa: PLC0415

    gc.manual_seed(4)
    layers = [nn.Linear(shape[-1], 20)] + ([nn.ReLU()] if relu else [])
    proto = gx.export(quantize_dynamic(nn.Sequential(*layers), {nn.Linear}), (gc.zeros(*shape),))
    ref = ReferenceEvaluator(proto)
    cm = gx.load(proto)
    for x in _inputs(shape):
        want = ref.run(None, {proto.graph.input[0].name: x})[0]
        np.testing.assert_array_equal(cm(gc.tensor(x)).numpy(), want)
        _assert_float_rounding(_run_ort(proto, x), want)
