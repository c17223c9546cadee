"""gpucore.onnx.ops.quantize: QuantizeLinear, DequantizeLinear (per tensor, per axis,
blocked), DynamicQuantizeLinear, MatMulInteger, QLinearMatMul against onnxruntime."""

import numpy as np
import pytest
from onnx_cases import check_op, model, rand

import gpucore.onnx

helper = pytest.importorskip("onnx").helper

F32 = np.float32


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
def test_quantize_dequantize_per_tensor_and_per_axis(dtype):
    x = rand(2, 3, 4, low=-30.0, high=30.0)
    x[0, 0, :2] = [0.5, 1.5]  # halves round to even
    zp = np.array(3, dtype)
    check_op("QuantizeLinear", [x, np.array(0.5, F32), zp], opset=13, static=(1, 2), out=dtype)
    scales, zps = np.array([0.5, 0.25, 1.0], F32), np.array([1, 2, 3], dtype)
    check_op("QuantizeLinear", [x, scales, zps], {"axis": 1}, opset=13, static=(1, 2), out=dtype)
    q = np.arange(24, dtype=dtype).reshape(2, 3, 4)
    check_op("DequantizeLinear", [q, np.array(0.5, F32), zp], opset=13, static=(1, 2), out=F32)
    check_op("DequantizeLinear", [q, scales, zps], {"axis": 1}, opset=13, static=(1, 2),
             out=F32)  # fmt: skip


def test_blocked_quantization():
    x = rand(2, 6, low=-10.0, high=10.0)
    scale = np.array([[0.5, 0.25], [1.0, 2.0]], F32)  # one per block of 3 along axis 1
    zp = np.array([[1, 2], [3, 4]], np.uint8)
    attrs = {"axis": 1, "block_size": 3}
    check_op("QuantizeLinear", [x, scale, zp], attrs, opset=21, static=(1, 2), out=np.uint8)
    q = np.arange(12, dtype=np.uint8).reshape(2, 6)
    check_op("DequantizeLinear", [q, scale, zp], attrs, opset=21, static=(1, 2), out=F32)


def test_dynamic_quantize_linear():
    for x in (rand(3, 4, low=-2.0, high=5.0), rand(3, 4, low=1.0, high=5.0)):
        check_op("DynamicQuantizeLinear", [x], opset=11, out=[np.uint8, F32, np.uint8])


def test_integer_matmuls():
    a = np.arange(12, dtype=np.uint8).reshape(3, 4)
    b = (np.arange(8, dtype=np.int32).reshape(4, 2) * 7 % 256).astype(np.uint8)
    zps = [np.array(3, np.uint8), np.array(5, np.uint8)]
    check_op("MatMulInteger", [a, b, *zps], opset=10, static=(2, 3), out=np.int32)
    # a static int8 B with zero point 0: the int8 GEMM (qmatmul_integer), A's zero point static
    # or a graph input (subtracted as zp * colsum(B))
    bi = (np.arange(8, dtype=np.int32).reshape(4, 2) * 37 % 255 - 127).astype(np.int8)
    args = [a, bi, zps[0], np.array(0, np.int8)]
    check_op("MatMulInteger", args, opset=10, static=(1, 2, 3), out=np.int32)
    check_op("MatMulInteger", args, opset=10, static=(1, 3), out=np.int32)
    # a static uint8 B with zero points 128 (gpucore.onnx.export's form) is B - 128 on the
    # int8 GEMM; another zero point takes the composition
    bu = (bi.astype(np.int16) + 128).astype(np.uint8)
    for bzp in ([128], [128, 128], [128, 127]):
        args = [a, bu, zps[0], np.array(bzp if len(bzp) > 1 else bzp[0], np.uint8)]
        check_op("MatMulInteger", args, opset=10, static=(1, 2, 3), out=np.int32)
    args = [a, np.array(0.1, F32), zps[0], b, np.array(0.2, F32), zps[1], np.array(0.3, F32),
            np.array(7, np.uint8)]  # fmt: skip
    check_op("QLinearMatMul", args, opset=10, static=(1, 2, 4, 5, 6, 7), out=np.uint8)


def test_conv_integer():
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, (2, 3, 7, 6), dtype=np.uint8)
    w = rng.integers(0, 256, (4, 3, 3, 3), dtype=np.uint8)
    zps = [np.array(120, np.uint8), np.array(131, np.uint8)]
    check_op("ConvInteger", [x, w, *zps], {"pads": [1, 1, 1, 1]}, opset=10, static=(1, 2, 3),
             out=np.int32)  # fmt: skip
    check_op("ConvInteger", [x, w], {"strides": [2, 1]}, opset=10, static=(1,), out=np.int32)


@pytest.mark.parametrize("zp_static", [True, False], ids=["static_zp", "traced_zp"])
def test_conv_integer_on_the_int8_convolution(zp_static):
    """A uint8 input and a static int8 weight with zero point 0: the runtime's qconv2d_integer,
    x's zero point static or a graph input (subtracted as zp times the weights each output
    position reads: the border positions read fewer); equal to onnxruntime, padding, strides and
    dilations included."""
    rng = np.random.default_rng(1)
    x = rng.integers(0, 256, (2, 3, 9, 8), dtype=np.uint8)
    w = rng.integers(-128, 128, (5, 3, 3, 2), dtype=np.int8)
    args = [x, w, np.array(117, np.uint8), np.array(0, np.int8)]
    static = (1, 2, 3) if zp_static else (1, 3)
    for attrs in ({"pads": [1, 1, 1, 1]}, {"strides": [2, 3], "pads": [2, 1, 2, 1]},
                  {"dilations": [2, 1], "pads": [1, 0, 1, 0]}, {}):  # fmt: skip
        check_op("ConvInteger", args, attrs, opset=10, static=static, out=np.int32)
    m = model(
        [helper.make_node("ConvInteger", ["x", "w", "zp"], ["y"], pads=[1, 1, 1, 1])],
        {"x": x, "zp": args[2]} if not zp_static else {"x": x},
        {"y": np.int32},
        {"w": w} if not zp_static else {"w": w, "zp": args[2]},
        opset=10,
    )
    cm = gpucore.onnx.load(m.SerializeToString())
    feeds = {"x": x} if zp_static else {"x": x, "zp": args[2]}
    cm.run_arrays([feeds[n] for n in cm.input_names])
    ops = {n.op for ex in cm.executors() for n in ex.plan.graph.nodes}
    assert "qconv2d_integer" in ops and "conv2d" not in ops, sorted(ops)
