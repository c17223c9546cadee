"""INT8 ONNX models (ONNX Runtime's ``quantize_static``, QDQ and QOperator formats, uint8 and
int8 activations, int8 weights per channel; built by ort_quantized.py) through gpucore.onnx onto
the runtime's int8 nodes.

Tolerances, and why:
- quantized with ``reduce_range=True`` (7-bit weights): equal bit for bit to ONNX Runtime. Both
  compute the exact integer sums, add the int32 bias and requantize with the same float32
  operations (``float32(sum + bias) * (x_scale * w_scale / y_scale)``, rounded half to even);
- full-range weights: equal bit for bit to a numpy reference of ONNX's integer semantics
  (QOperator), and within one output quantization step of ONNX Runtime's float QDQ semantics
  (DQ -> float32 Conv / Gemm -> Q, graph optimizations off: float sums round differently only at
  ties). ONNX Runtime's own fused kernels are not a reference there: on AVX2 without VNNI, its
  uint8 x int8 kernel (vpmaddubsw) saturates pairs of products at int16 (measured here: 3
  steps off on the CNN), which is why its quantizer offers reduce_range.
"""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
quant = pytest.importorskip("onnxruntime.quantization")

from onnx import TensorProto as TP  # noqa: E402
from onnx import helper as h  # noqa: E402
from onnx import numpy_helper as nh  # noqa: E402
from ort_quantized import MODELS, float_out, graph_ops, model_input, quantized, run_ort  # noqa: E402

import gpucore  # noqa: E402
import gpucore.onnx as gx  # noqa: E402

F32 = np.float32
FLOAT_OPS = {"conv2d", "gemm", "matmul", "linear"}
INT8_OPS = {"qconv2d", "qlinear"}


# -------------------------------------------------------------------------------------- tests
@pytest.mark.parametrize("act", ["QUInt8", "QInt8"])
@pytest.mark.parametrize("fmt", ["QDQ", "QOperator"])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_bit_exact_with_onnxruntime_on_int8_nodes(tmp_path, name, fmt, act):
    path = quantized(tmp_path, name, fmt, act)
    cm = gx.load(path)
    for batch in (1, 5):  # the batch dim is dynamic ("N")
        x = model_input(name, batch)
        np.testing.assert_array_equal(cm(gpucore.from_numpy(x)).numpy(), run_ort(path, x))
    ops = graph_ops(cm)
    assert INT8_OPS & ops and not FLOAT_OPS & ops, sorted(ops)
    if name == "cnn":
        assert "qconv2d" in ops and "qlinear" in ops
    for ex in cm.executors():
        assert ex.python_steps == 0  # every node runs in the one C program


@pytest.mark.parametrize("fmt", ["QDQ", "QOperator"])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_per_tensor_weights(tmp_path, name, fmt):
    """ONNX Runtime's default per_channel=False: one weight scale, repeated per channel."""
    path = quantized(tmp_path, name, fmt, "QUInt8", per_channel=False)
    cm = gx.load(path)
    x = model_input(name, 3)
    np.testing.assert_array_equal(cm(gpucore.from_numpy(x)).numpy(), run_ort(path, x))
    ops = graph_ops(cm)
    assert INT8_OPS & ops and not FLOAT_OPS & ops, sorted(ops)


def _spec(path, x):
    """numpy reference of the QOperator CNN's integer semantics (ONNX's QLinearConv and ONNX
    Runtime's QGemm): exact int64 sums, the int32 bias, float32 requantization."""
    m = onnx.load(path)
    inits = {i.name: nh.to_array(i) for i in m.graph.initializer}

    def q(v, s, z):
        lo, hi = (0, 255) if z.dtype == np.uint8 else (-128, 127)
        y = np.clip(v.astype(F32) / F32(s), F32(lo - int(z)), F32(hi - int(z)))
        return (np.rint(y) + int(z)).astype(z.dtype)

    def requant(acc, xs, ws, ys, yz, b):
        c = (acc + b).astype(np.int32).astype(F32)
        return q(c * ((F32(xs) * ws.astype(F32)) / F32(ys)), F32(1), yz)

    env = {"x": x}
    for nd in m.graph.node:
        a = {t.name: h.get_attribute_value(t) for t in nd.attribute}
        ins = [env[i] if i in env else inits[i] for i in nd.input]
        if nd.op_type == "QuantizeLinear":
            r = q(ins[0], ins[1], ins[2])
        elif nd.op_type == "DequantizeLinear":
            r = ((ins[0].astype(np.int32) - int(ins[2])).astype(F32) * F32(ins[1])).astype(F32)
        elif nd.op_type == "QLinearConv":
            xq, xz, w = ins[0].astype(np.int64), int(ins[2]), ins[3].astype(np.int64)
            p, s = a.get("pads", [0] * 4)[0], a.get("strides", [1, 1])[0]
            n, c, hh, ww = xq.shape
            o, _, kh, kw = w.shape
            xp = np.full((n, c, hh + 2 * p, ww + 2 * p), xz, np.int64)
            xp[:, :, p : p + hh, p : p + ww] = xq
            oh, ow = (hh + 2 * p - kh) // s + 1, (ww + 2 * p - kw) // s + 1
            acc = np.zeros((n, o, oh, ow), np.int64)
            for i in range(kh):
                for j in range(kw):
                    win = xp[:, :, i : i + s * (oh - 1) + 1 : s, j : j + s * (ow - 1) + 1 : s]
                    acc += np.einsum("nchw,oc->nohw", win - xz, w[:, :, i, j])
            per = (1, -1, 1, 1)
            r = requant(acc, ins[1], ins[4].reshape(per), ins[6], ins[7], ins[8].reshape(per))
        elif nd.op_type == "MaxPool":
            v = ins[0]
            n, c, hh, ww = v.shape
            r = v.reshape(n, c, hh // 2, 2, ww // 2, 2).max(axis=(3, 5))
        elif nd.op_type == "Flatten":
            r = ins[0].reshape(ins[0].shape[0], -1)
        elif nd.op_type == "QGemm":
            acc = (ins[0].astype(np.int64) - int(ins[2])) @ ins[3].astype(np.int64).T
            r = requant(acc, ins[1], ins[4].reshape(1, -1), ins[7], ins[8], ins[6].reshape(1, -1))
        else:
            raise AssertionError(nd.op_type)
        env[nd.output[0]] = r
    return env["y"]


@pytest.mark.parametrize("act", ["QUInt8", "QInt8"])
def test_full_range_weights_follow_onnx_integer_semantics(tmp_path, act):
    path = quantized(tmp_path, "cnn", "QOperator", act, reduce_range=False)
    x = model_input("cnn", 4)
    y = gx.load(path)(gpucore.from_numpy(x)).numpy()
    np.testing.assert_array_equal(y, _spec(path, x))


@pytest.mark.parametrize("name", sorted(MODELS))
def test_full_range_qdq_within_one_step_of_float_semantics(tmp_path, name):
    path = quantized(tmp_path, name, "QDQ", "QUInt8", reduce_range=False)
    x = model_input(name, 6)
    y = gx.load(path)(gpucore.from_numpy(x)).numpy()
    m = onnx.load(path)
    step = max(float(nh.to_array(i)) for i in m.graph.initializer if i.name.startswith("y_scale"))
    np.testing.assert_allclose(y, run_ort(path, x, optimize=False), rtol=0, atol=step * 1.001)


def test_interpreted_executor_gives_the_same_bits(tmp_path):
    path = quantized(tmp_path, "cnn", "QDQ", "QInt8")
    x = model_input("cnn", 3)
    compiled = gx.load(path)(gpucore.from_numpy(x)).numpy()
    interpreted = gx.load(path, executor="interpreted")(gpucore.from_numpy(x)).numpy()
    np.testing.assert_array_equal(compiled, interpreted)
    np.testing.assert_array_equal(compiled, run_ort(path, x))


def test_unfusable_layers_stay_correct(tmp_path):
    """A grouped convolution (the int8 conv kernel has groups = 1) and a weight with nonzero
    zero points run dequantized in float32, within one quantization step (int8 activations:
    ONNX Runtime's int8 x int8 kernel has no int16 saturation, so it is exact here)."""
    rng = np.random.default_rng(2)
    xq = h.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"])
    conv = h.make_node(
        "QLinearConv", ["xq", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"], ["yq"], group=2,
        pads=[1, 1, 1, 1],
    )  # fmt: skip
    dq = h.make_node("DequantizeLinear", ["yq", "ys", "yz"], ["y"])
    inits = [
        nh.from_array(np.array(0.05, F32), "xs"),
        nh.from_array(np.array(-8, np.int8), "xz"),
        nh.from_array(rng.integers(-127, 128, (4, 2, 3, 3)).astype(np.int8), "w"),
        nh.from_array(np.array([0.01, 0.02, 0.015, 0.01], F32), "ws"),
        nh.from_array(np.array([0, 3, -2, 1], np.int8), "wz"),
        nh.from_array(np.array(0.1, F32), "ys"),
        nh.from_array(np.array(3, np.int8), "yz"),
        nh.from_array(rng.integers(-500, 500, 4).astype(np.int32), "b"),
    ]
    g = h.make_graph(
        [xq, conv, dq],
        "grouped",
        [h.make_tensor_value_info("x", TP.FLOAT, [2, 4, 6, 6])],
        [h.make_tensor_value_info("y", TP.FLOAT, [2, 4, 6, 6])],
        inits,
    )
    model = h.make_model(g, opset_imports=[h.make_opsetid("", 13)], ir_version=8)
    path = str(tmp_path / "grouped.onnx")
    onnx.save(model, path)
    x = rng.standard_normal((2, 4, 6, 6)).astype(F32) * 2
    cm = gx.load(path)
    y = cm(gpucore.from_numpy(x)).numpy()
    np.testing.assert_allclose(y, run_ort(path, x), rtol=0, atol=0.1 * 1.001)
    assert not INT8_OPS & graph_ops(cm)  # the float path, as documented
    assert all(ex.python_steps == 0 for ex in cm.executors())  # the weights folded to float


def test_vulkan_runs_the_model_as_float_compositions(tmp_path, vulkan):
    """The Vulkan executor has no int8 shaders: there the quantize / dequantize nodes stay
    compositions of float ops, within one output step of the CPU's int8 nodes."""
    path = quantized(tmp_path, "mlp", "QDQ", "QInt8")
    x = model_input("mlp", 3)
    on_cpu = gx.load(path, device="cpu")(gpucore.from_numpy(x)).numpy()
    cm = gx.load(path, device="vulkan")
    on_vulkan = cm(gpucore.from_numpy(x)).numpy()
    step = max(float(nh.to_array(i)) for i in onnx.load(path).graph.initializer
               if i.name.startswith("y_scale"))  # fmt: skip
    np.testing.assert_allclose(on_vulkan, on_cpu, rtol=0, atol=step * 1.001)


def test_saved_and_loaded_with_the_runtime(tmp_path):
    """The imported int8 model saves like any CompiledModel (int8 weights, int32 biases, the
    ONNX rounding attribute) and loads back to the same bits."""
    from gpucore.runtime import load  # noqa: PLC0415

    path = quantized(tmp_path, "cnn", "QOperator", "QInt8")
    cm = gx.load(path)
    x = model_input("cnn", 2)
    cm.save(str(tmp_path / "cnn.gcm"))
    again = load(str(tmp_path / "cnn.gcm"))
    np.testing.assert_array_equal(again(gpucore.from_numpy(x)).numpy(), run_ort(path, x))


@pytest.mark.parametrize("name", ["mlp", "matmuls", "cnn"])
def test_dynamic_quantization_on_the_int8_kernels(tmp_path, name):
    """ONNX Runtime's quantize_dynamic (DynamicQuantizeLinear -> MatMulInteger / ConvInteger ->
    Cast -> Mul): DynamicQuantizeLinear runs as the fused dynamic_quantize_linear kernel,
    MatMulInteger -> Cast -> Mul -> Add as one qlinear_dynamic (the int8 GEMM's exact sums at the
    traced zero point, its float32 epilogue), ConvInteger as the int8 convolution's; equal bit for
    bit to ONNX's reference evaluator (ONNX Runtime's AVX2 uint8 x int8 kernel saturates with
    full-range weights, as above)."""
    from onnx.reference import ReferenceEvaluator  # noqa: PLC0415

    build, shape = MODELS[name]
    src, dst = str(tmp_path / "f.onnx"), str(tmp_path / "dyn.onnx")
    onnx.save(build(np.random.default_rng(1)), src)
    quant.quantize_dynamic(src, dst, weight_type=quant.QuantType.QInt8, per_channel=True)
    cm = gx.load(dst)
    x = model_input(name, 5)
    want = ReferenceEvaluator(dst).run(None, {"x": x})[0]
    np.testing.assert_array_equal(cm(gpucore.from_numpy(x)).numpy(), want)
    ops = graph_ops(cm)
    assert {"dynamic_quantize_linear", "qlinear_dynamic"} <= ops, sorted(ops)
    assert not FLOAT_OPS & ops and "qmatmul_integer" not in ops, sorted(ops)
    assert name != "cnn" or "qconv2d_integer" in ops, sorted(ops)  # ConvInteger
    assert all(ex.python_steps == 0 for ex in cm.executors())  # casts included


@pytest.mark.parametrize("name", ["mlp", "matmuls", "cnn"])
def test_vulkan_runs_dynamic_quantization_as_the_cpu(tmp_path, vulkan, name):
    """device="vulkan": ONNX Runtime's quantize_dynamic model imported onto the same int8 nodes
    as for the CPU (dynamic_quantize_linear, qlinear_dynamic, qconv2d_integer), run as the
    Vulkan executor's int8 shaders: the CPU's outputs bit for bit, NaN inputs included, at every
    batch size. Without shaderFloat64 the importer keeps float compositions, which that device
    cannot run either: the load is refused, naming the node and the fix."""
    from gpucore.errors import DeviceError  # noqa: PLC0415

    src, dst = str(tmp_path / "f.onnx"), str(tmp_path / "dyn.onnx")
    onnx.save(MODELS[name][0](np.random.default_rng(1)), src)
    quant.quantize_dynamic(src, dst, weight_type=quant.QuantType.QInt8, per_channel=True)
    if vulkan.ctx.float64:
        vm, cm = gx.load(dst, device="vulkan"), gx.load(dst, device="cpu")
        for batch in (1, 5):
            x = model_input(name, batch)
            for v in (x, x * 40, np.where(np.arange(x.size).reshape(x.shape) == 3, np.nan, x)):
                v = v.astype(F32)
                got = vm(gpucore.from_numpy(v)).cpu().numpy()
                np.testing.assert_array_equal(got, cm(gpucore.from_numpy(v)).numpy())
        ops = {s.node.op for ex in vm.executors() for s in ex.plan.steps}
        assert {"dynamic_quantize_linear", "qlinear_dynamic"} <= ops, sorted(ops)
        assert not FLOAT_OPS & ops and "qmatmul_integer" not in ops, sorted(ops)
        assert name != "cnn" or "qconv2d_integer" in ops, sorted(ops)
    vulkan.ctx.float64, had = False, vulkan.ctx.float64
    try:
        with pytest.raises(DeviceError, match=r"node \w+ \(\w+ of .*device='cpu'"):
            gx.load(dst, device="vulkan")
    finally:
        vulkan.ctx.float64 = had


@pytest.mark.parametrize("act", ["QUInt8", "QInt8"])
@pytest.mark.parametrize("fmt", ["QDQ", "QOperator"])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_int8_models_imported_for_vulkan(tmp_path, vulkan, name, fmt, act):
    """An ONNX int8 model loaded with device="vulkan" becomes the int8 nodes (as for the CPU)
    and runs on the int8 shaders: ONNX Runtime's outputs bit for bit, no float GEMM left."""
    if not vulkan.ctx.float64:
        pytest.skip(f"{vulkan.ctx.info.name} has no shaderFloat64 (ONNX's rounding)")
    path = quantized(tmp_path, name, fmt, act)
    vm = gx.load(path, device="vulkan")
    for batch in (1, 5):
        x = model_input(name, batch)
        np.testing.assert_array_equal(vm(gpucore.from_numpy(x)).cpu().numpy(), run_ort(path, x))
    ops = {s.node.op for ex in vm.executors() for s in ex.plan.steps}
    assert INT8_OPS & ops and not FLOAT_OPS & ops, sorted(ops)


def test_qgemm_with_float_output(tmp_path):
    """QGemm without y_scale (com.microsoft: float32 out) is qlinear's float32 epilogue."""
    path = float_out(quantized(tmp_path, "mlp", "QOperator", "QInt8"))
    cm = gx.load(path)
    x = model_input("mlp", 4)
    np.testing.assert_array_equal(cm(gpucore.from_numpy(x)).numpy(), run_ort(path, x))
    assert graph_ops(cm) == {"quantize_linear", "qlinear"}


@pytest.mark.parametrize("act", ["QUInt8", "QInt8"])
@pytest.mark.parametrize("fmt", ["QDQ", "QOperator"])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_int8_nodes_saved_then_run_on_vulkan(tmp_path, vulkan, name, fmt, act):
    """An ONNX int8 model imported for the CPU (the runtime's int8 nodes, ONNX's QuantizeLinear
    rounding and int32 biases included), saved and loaded for the Vulkan executor: its int8
    shaders give ONNX Runtime's outputs bit for bit too, at every batch size."""
    from gpucore.runtime import load  # noqa: PLC0415

    if not vulkan.ctx.float64:
        pytest.skip(f"{vulkan.ctx.info.name} has no shaderFloat64 (ONNX's rounding)")
    path = quantized(tmp_path, name, fmt, act)
    with gpucore.device_policy("cpu"):  # traced on the CPU (a Vulkan trace lowers convolutions)
        gx.load(path, device="cpu").save(str(tmp_path / "m.gcm"))
    vm = load(str(tmp_path / "m.gcm"), device="vulkan")
    for batch in (1, 5):
        x = model_input(name, batch)
        np.testing.assert_array_equal(vm(gpucore.from_numpy(x)).numpy(), run_ort(path, x))
    ops = {s.node.op for ex in vm.executors() for s in ex.plan.steps}
    assert INT8_OPS & ops and not FLOAT_OPS & ops, sorted(ops)
