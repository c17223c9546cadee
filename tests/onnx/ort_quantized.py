"""ONNX Runtime's statically quantized models (``quantize_static``: QDQ and QOperator formats,
uint8 or int8 activations, int8 weights), shared by tests/onnx/test_quantized_models.py and
tests/capi/test_onnx_qmodel.py: the float models, their quantized files, inputs and ONNX
Runtime's outputs."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
quant = pytest.importorskip("onnxruntime.quantization")

from onnx import TensorProto as TP  # noqa: E402
from onnx import helper as h  # noqa: E402
from onnx import numpy_helper as nh  # noqa: E402

F32 = np.float32


# --------------------------------------------------------------------------------- the models
def _model(nodes, inits, in_shape, out_shape, name):
    g = h.make_graph(
        nodes,
        name,
        [h.make_tensor_value_info("x", TP.FLOAT, ["N", *in_shape])],
        [h.make_tensor_value_info("y", TP.FLOAT, ["N", *out_shape])],
        inits,
    )
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)], ir_version=8)


def _init(rng, name, shape, s):
    return nh.from_array((rng.standard_normal(shape) * s).astype(F32), name)


def cnn(rng):
    """Conv-ReLU-MaxPool-Conv(stride 2)-ReLU-Flatten-Gemm on 3x16x16."""
    inits = [_init(rng, "w1", (8, 3, 3, 3), 0.3), _init(rng, "b1", (8,), 0.1),
             _init(rng, "w2", (16, 8, 3, 3), 0.2), _init(rng, "b2", (16,), 0.1),
             _init(rng, "wf", (10, 256), 0.1), _init(rng, "bf", (10,), 0.1)]  # fmt: skip
    nodes = [
        h.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        h.make_node("Relu", ["c1"], ["r1"]),
        h.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
        h.make_node("Conv", ["p1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1], strides=[2, 2]),
        h.make_node("Relu", ["c2"], ["r2"]),
        h.make_node("Flatten", ["r2"], ["f"]),
        h.make_node("Gemm", ["f", "wf", "bf"], ["y"], transB=1),
    ]
    return _model(nodes, inits, (3, 16, 16), (10,), "cnn")


def mlp(rng):
    """Linear-ReLU-Linear as exporters write it (Gemm, transB=1)."""
    inits = [_init(rng, "w1", (64, 32), 0.2), _init(rng, "b1", (64,), 0.1),
             _init(rng, "w2", (10, 64), 0.2), _init(rng, "b2", (10,), 0.1)]  # fmt: skip
    nodes = [
        h.make_node("Gemm", ["x", "w1", "b1"], ["a1"], transB=1),
        h.make_node("Relu", ["a1"], ["r1"]),
        h.make_node("Gemm", ["r1", "w2", "b2"], ["y"], transB=1),
    ]
    return _model(nodes, inits, (32,), (10,), "mlp")


def matmuls(rng):
    """MatMul-ReLU-MatMul without biases (QLinearMatMul in the QOperator format)."""
    inits = [_init(rng, "w1", (32, 48), 0.2), _init(rng, "w2", (48, 10), 0.2)]
    nodes = [
        h.make_node("MatMul", ["x", "w1"], ["m1"]),
        h.make_node("Relu", ["m1"], ["r1"]),
        h.make_node("MatMul", ["r1", "w2"], ["y"]),
    ]
    return _model(nodes, inits, (32,), (10,), "matmuls")


MODELS = {"cnn": (cnn, (3, 16, 16)), "mlp": (mlp, (32,)), "matmuls": (matmuls, (32,))}


class Batches(quant.CalibrationDataReader):
    """A few random calibration batches."""

    def __init__(self, shape, seed=0, n=4):
        rng = np.random.default_rng(seed)
        self.it = iter([{"x": rng.standard_normal((4, *shape)).astype(F32)} for _ in range(n)])

    def get_next(self):
        return next(self.it, None)


def quantized(tmp_path, name, fmt, act, reduce_range=True, per_channel=True):
    """The path of ``name`` quantized by ONNX Runtime (int8 weights, per channel or not)."""
    build, shape = MODELS[name]
    src, dst = tmp_path / f"{name}.onnx", tmp_path / f"{name}_{fmt}_{act}.onnx"
    onnx.save(build(np.random.default_rng(1)), str(src))
    quant.quantize_static(
        str(src),
        str(dst),
        Batches(shape),
        quant_format=getattr(quant.QuantFormat, fmt),
        per_channel=per_channel,
        reduce_range=reduce_range,
        activation_type=getattr(quant.QuantType, act),
        weight_type=quant.QuantType.QInt8,
    )
    return str(dst)


def run_ort(path, x, optimize=True):
    so = ort.SessionOptions()
    if not optimize:
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    return sess.run(None, {"x": x})[0]


def graph_ops(cm) -> set:
    """The op names of the compiled model's graphs (every executor built so far)."""
    return {n.op for ex in cm.executors() for n in ex.plan.graph.nodes}


def model_input(name, batch, seed=5):
    """A random float32 input of MODELS[name] with this batch size."""
    return np.random.default_rng(seed).standard_normal((batch, *MODELS[name][1])).astype(F32)


def float_out(path: str) -> str:
    """The QOperator model at ``path`` with its last QGemm writing float32 (com.microsoft's QGemm
    without y_scale) in place of the final DequantizeLinear: a float32 epilogue with the int32
    bias."""
    m = onnx.load(path)
    last = [n for n in m.graph.node if n.op_type == "QGemm"][-1]
    dq = m.graph.node[len(m.graph.node) - 1]
    assert dq.op_type == "DequantizeLinear"
    del last.input[7:]
    last.output[0] = "y"
    m.graph.node.remove(dq)
    out = path.replace(".onnx", "_float_out.onnx")
    onnx.save(m, out)
    return out
