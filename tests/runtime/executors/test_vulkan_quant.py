"""gpucore.runtime.executors.vulkan_quant: the runtime's quantized ops recorded as int8 shaders,
equal bit for bit to the CPU executor on the same graph (lavapipe in CI): each op alone on odd
shapes, geometries, zero points and NaN / inf inputs; statically quantized models (an MLP, a CNN,
a residual one, a dynamic batch) whole; ONNX dynamic quantization's nodes (DynamicQuantizeLinear's
three, qlinear_dynamic, MatMulInteger with a traced zero point); the nodes that stay on the CPU
refused."""

from __future__ import annotations

import numpy as np
import pytest
from quantized_models import QMODELS, quantized

import gpucore
from gpucore import dtypes as D
from gpucore.errors import DeviceError
from gpucore.quantization import kernels, quantize_static
from gpucore.runtime import load
from gpucore.runtime.executors.cpu import CompiledExecutor
from gpucore.runtime.ir.dynamic_quant import torch_quantize_ref
from gpucore.runtime.ir.graph import Graph
from gpucore.runtime.ir.ops import op_info
from gpucore.runtime.planner.plan import plan

pytestmark = pytest.mark.skipif(not kernels.has_qgemm(), reason="no C int8 GEMM in this build")
RNG = np.random.default_rng(15)


def _graph(op, arrays, attrs, shape, dt, n_inputs=1):
    """One node ``op`` reading ``arrays`` (the first ``n_inputs`` graph inputs, the rest
    constants)."""
    g = Graph()
    names = [
        g.add_input(f"x{i}", a.shape, D.from_numpy_dtype(a.dtype))
        for i, a in enumerate(arrays[:n_inputs])
    ]
    names += [g.add_constant(np.ascontiguousarray(a)) for a in arrays[n_inputs:]]
    node = g.add_node(op, names, shape, dt, attrs)
    g.outputs = [node.output]
    return g


def _both(op, arrays, attrs, shape, dt, n_inputs=1):
    """(CPU executor's output, Vulkan executor's output, numpy reference) of one node."""
    from gpucore.runtime.executors.vulkan import VulkanExecutor

    g = _graph(op, arrays, attrs, shape, dt, n_inputs)
    ins = [np.ascontiguousarray(a) for a in arrays[:n_inputs]]
    (cpu,) = CompiledExecutor(plan(g)).run(ins)
    (dev,) = VulkanExecutor(
        plan(_graph(op, arrays, attrs, shape, dt, n_inputs), inplace=False)
    ).run(ins)
    return cpu, dev, op_info(op).evaluate([np.ascontiguousarray(a) for a in arrays], attrs)


def assert_bits(got, want, msg=""):
    assert got.dtype == want.dtype and got.shape == want.shape, msg
    got, want = got.reshape(-1), want.reshape(-1)  # (0-d arrays have no byte view)
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8), err_msg=msg)


def _check(*case, n_inputs=1):
    cpu, dev, ref = _both(*case, n_inputs=n_inputs)
    assert_bits(cpu, ref, f"{case[0]}: the CPU against its reference")
    assert_bits(dev, cpu, f"{case[0]} {case[2]}")


SPECIAL = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 1e30, -1e30, 2.5, 3.5, -2.5, 1e-40],
                   np.float32)  # fmt: skip


@pytest.mark.parametrize("size", [1, 3, 4, 5, 37, 1027])
def test_quantize_dequantize_odd_sizes_and_special_values(vulkan, size):
    x = (RNG.standard_normal(size) * 4).astype(np.float32)
    x[: min(size, SPECIAL.size)] = SPECIAL[:size]
    for scale, zp in ((0.05, 100), (1.0, 0), (0.5, 255), (3e-3, 7)):
        # ties: x / scale + zp landing on k + 0.5 round to even
        q_attrs = {"scale": scale, "zero_point": zp}
        _check("quantize_linear", [x.reshape(1, size)], q_attrs, (1, size), D.uint8)
        q = RNG.integers(0, 256, (size,), dtype=np.uint8)
        _check("dequantize_linear", [q], q_attrs, (size,), D.float32)


def test_quantize_rounds_half_to_even(vulkan):
    x = (np.arange(-20, 20, dtype=np.float32) + 0.5) * np.float32(0.25)
    for onnx in (False, True)[: 1 + vulkan.ctx.float64]:
        attrs = {"scale": 0.25, "zero_point": 10, "onnx": onnx}
        _check("quantize_linear", [x], attrs, x.shape, D.uint8)


@pytest.mark.parametrize("scale", [0.1, 0.0123, 3.3, 1e-3, 7.0])
def test_onnx_quantize_is_the_correctly_rounded_division(vulkan, scale):
    if not vulkan.ctx.float64:
        pytest.skip(f"{vulkan.ctx.info.name} has no shaderFloat64")
    """onnx=True (ONNX's QuantizeLinear, _cpu.quantize_linear_u8): x / scale correctly rounded,
    then clamped and rounded half to even; inputs next to the half-way points, where a
    reciprocal multiply or an inexact division rounds the other way, and special values."""
    s = np.float32(scale)
    half = ((np.arange(-130, 130, dtype=np.float32) + np.float32(0.5)) * s).astype(np.float32)
    bits = half.view(np.int32)
    near = np.concatenate([(bits + d).view(np.float32) for d in (-2, -1, 0, 1, 2)])
    x = np.concatenate([near, SPECIAL, (RNG.standard_normal(999) * 200 * s).astype(np.float32)])
    for zp in (0, 128, 255):
        attrs = {"scale": scale, "zero_point": zp, "onnx": True}
        _check("quantize_linear", [x], attrs, x.shape, D.uint8)


LIN = {"a_scale": 0.03, "a_zero_point": 7, "relu": False, "out_scale": None}


@pytest.mark.parametrize("m,n,k", [(1, 1, 1), (1, 10, 50), (7, 33, 96), (5, 6, 13), (64, 17, 3)])
@pytest.mark.parametrize("out", ["float32", "uint8", "uint8_relu", "float32_relu"])
def test_qlinear_odd_shapes(vulkan, m, n, k, out):
    a = RNG.integers(0, 256, (m, k), dtype=np.uint8)
    w = RNG.integers(-127, 128, (n, k), dtype=np.int8)
    s = RNG.uniform(0.001, 0.01, n).astype(np.float32)
    b = RNG.standard_normal(n).astype(np.float32)
    attrs = dict(LIN, relu=out.endswith("relu"))
    dt = D.float32
    if out.startswith("uint8"):
        attrs.update(out_scale=0.07, out_zero_point=31)
        dt = D.uint8
    _check("qlinear", [a, w, s, b], attrs, (m, n), dt)
    _check("qlinear", [a.reshape(1, m, k), w, s], attrs, (1, m, n), dt)  # no bias, 3-d
    ib = RNG.integers(-(2**20), 2**20, n, dtype=np.int32)  # ONNX's int32 bias, into the sums
    _check("qlinear", [a, w, s, ib], attrs, (m, n), dt)


def test_qmatmul_integer(vulkan):
    a = RNG.integers(0, 256, (2, 5, 13), dtype=np.uint8)
    w = RNG.integers(-128, 128, (9, 13), dtype=np.int8)
    _check("qmatmul_integer", [a, w], {"a_zero_point": 131}, (2, 5, 9), D.int32)


GEOS = [((3, 3), (1, 1), (1, 1), (1, 1)), ((3, 2), (2, 1), (1, 2), (1, 2)),
        ((1, 1), (1, 1), (0, 0), (1, 1)), ((5, 5), (3, 2), (2, 0), (1, 1))]  # fmt: skip


@pytest.mark.parametrize("geo", GEOS)
@pytest.mark.parametrize("batch", [1, 2])
def test_qconv2d_geometries(vulkan, geo, batch):
    (kh, kw), stride, padding, dilation = geo
    c, o = 3, 5
    x = RNG.integers(0, 256, (batch, c, 9, 7), dtype=np.uint8)
    w = RNG.integers(-127, 128, (o, c, kh, kw), dtype=np.int8)
    s = RNG.uniform(0.001, 0.01, o).astype(np.float32)
    b = RNG.standard_normal(o).astype(np.float32)
    conv = {"stride": stride, "padding": padding, "dilation": dilation, "a_scale": 0.03,
            "a_zero_point": 200, "relu": True, "out_scale": 0.2, "out_zero_point": 3}  # fmt: skip
    shape = op_info("qconv2d").evaluate([x, w, s, b], conv).shape
    _check("qconv2d", [x, w, s, b], conv, shape, D.uint8)
    _check("qconv2d", [x, w, s], dict(conv, out_scale=None, relu=False), shape, D.float32)
    ib = RNG.integers(-5000, 5000, o, dtype=np.int32)
    _check("qconv2d", [x, w, s, ib], conv, shape, D.uint8)
    ints = {k: conv[k] for k in ("stride", "padding", "dilation", "a_zero_point")}
    _check("qconv2d_integer", [x, w], ints, shape, D.int32)


def test_qconv2d_runs_in_passes_of_images_within_one_storage_binding(vulkan, monkeypatch):
    # Pretend bindings of 1,200 and 2,500 bytes stand for a device's maxStorageBufferRange: an
    # image has 42 rows of 12 bytes (504), so passes of 2 or 4 images (uint8 out: 5 * 42 bytes
    # an image, so an even count keeps each pass's out on a 32-bit word) or 1 or 2 (float32 out,
    # 840 bytes an image); below one image's rows, a clear refusal.
    x = RNG.integers(0, 256, (7, 3, 8, 7), dtype=np.uint8)
    w = RNG.integers(-127, 128, (5, 3, 2, 2), dtype=np.int8)
    s = RNG.uniform(0.001, 0.01, 5).astype(np.float32)
    b = RNG.standard_normal(5).astype(np.float32)
    conv = {"stride": (1, 1), "padding": (0, 0), "dilation": (1, 1), "a_scale": 0.03,
            "a_zero_point": 200, "relu": True, "out_scale": 0.2, "out_zero_point": 3}  # fmt: skip
    shape = op_info("qconv2d").evaluate([x, w, s, b], conv).shape
    for limit in (1200, 2500):
        monkeypatch.setitem(vulkan.ctx.limits, "maxStorageBufferRange", limit)
        _check("qconv2d", [x, w, s, b], conv, shape, D.uint8)
        _check("qconv2d", [x, w, s], dict(conv, out_scale=None, relu=False), shape, D.float32)
    monkeypatch.setitem(vulkan.ctx.limits, "maxStorageBufferRange", 400)
    with pytest.raises(DeviceError, match="qconv2d node .* one image's int8 rows need"):
        _both("qconv2d", [x, w, s, b], conv, shape, D.uint8)


@pytest.mark.parametrize(
    "kernel,stride,padding,dilation",
    [((2, 2), (2, 2), (0, 0), (1, 1)), ((3, 3), (2, 2), (1, 1), (1, 1)),
     ((3, 2), (1, 2), (1, 1), (2, 1))],
)  # fmt: skip
def test_qmax_pool2d(vulkan, kernel, stride, padding, dilation):
    x = RNG.integers(0, 256, (2, 3, 7, 9), dtype=np.uint8)
    attrs = {"kernel": kernel, "stride": stride, "padding": padding, "dilation": dilation}
    shape = op_info("qmax_pool2d").evaluate([x], attrs).shape
    _check("qmax_pool2d", [x], attrs, shape, D.uint8)


@pytest.mark.parametrize("name", sorted(QMODELS))
def test_quantized_models_equal_the_cpu(vulkan, name):
    fm, qm, x = quantized(name)
    vm = quantize_static(fm, [x, x * 0.5], device="vulkan")
    cm = quantize_static(fm, [x, x * 0.5], device="cpu")
    ex = vm.executors()[0]
    assert vm.device == "vulkan" and type(ex).__name__ == "VulkanExecutor"
    # the int8 weights are on the device once: packed, not also as raw constants
    assert ex.qweights and not set(ex.qweights) & set(ex.constants)
    bad = x.copy().reshape(-1)
    bad[: SPECIAL.size] = SPECIAL
    inputs = [x, x[:1], bad.reshape(x.shape)] if name.endswith("_dynamic") else [x]
    if name.endswith("_dynamic"):
        inputs.append(np.concatenate([x, x, x[:3]]))  # a size it was not built at
    for v in inputs:
        want = cm.run_arrays([v])[0]
        assert_bits(vm.run_arrays([v])[0], want, name)
    assert_bits(vm.run_arrays([bad.reshape(x.shape)])[0], cm.run_arrays([bad.reshape(x.shape)])[0])


def test_saved_model_loads_on_vulkan(vulkan, tmp_path):
    _, qm, x = quantized("qcnn")
    qm.save(tmp_path / "q.gcm")
    vm = load(tmp_path / "q.gcm", device="vulkan")
    assert vm.device == "vulkan"
    assert_bits(vm.run_arrays([x])[0], qm.run_arrays([x])[0])


def test_cpu_only_quantized_nodes_are_refused(vulkan):
    """A per-channel weight dequantization, dynamic quantization and (without shaderFloat64)
    ONNX's QuantizeLinear rounding stay CPU-only."""
    from gpucore.runtime.executors.vulkan import VulkanExecutor

    x = RNG.standard_normal((4, 6)).astype(np.float32)
    w = RNG.integers(-127, 128, (5, 6), dtype=np.int8)
    s = RNG.uniform(0.01, 0.1, 5).astype(np.float32)
    g = _graph("dequantize_linear", [w, s], {"axis": 0}, w.shape, D.float32, n_inputs=2)
    with pytest.raises(DeviceError, match="per-channel.*device='cpu'"):
        VulkanExecutor(plan(g, inplace=False))
    # ONNX's QuantizeLinear rounding on a device without shaderFloat64
    g = _graph("quantize_linear", [x], {"scale": 0.1, "zero_point": 3, "onnx": True}, x.shape,
               D.uint8)  # fmt: skip
    vulkan.ctx.float64, had = False, vulkan.ctx.float64
    try:
        with pytest.raises(DeviceError, match="quantize_linear.*shaderFloat64.*device='cpu'"):
            VulkanExecutor(plan(g, inplace=False))
    finally:
        vulkan.ctx.float64 = had
    # a subnormal scale: 1 / scale is inf in float32, and devices may flush subnormals
    g = _graph("quantize_linear", [x], {"scale": 1e-39, "zero_point": 3, "onnx": True}, x.shape,
               D.uint8)  # fmt: skip
    with pytest.raises(DeviceError, match="quantize_linear.*subnormal scale.*device='cpu'"):
        VulkanExecutor(plan(g, inplace=False))
    # DynamicQuantizeLinear without shaderFloat64 (its correctly rounded divisions)
    g = _graph("dynamic_quantize_linear", [x], {"output_index": 0}, x.shape, D.uint8)
    vulkan.ctx.float64, had = False, vulkan.ctx.float64
    try:
        with pytest.raises(
            DeviceError, match="dynamic_quantize_linear of float32.*shaderFloat64.*device='cpu'"
        ):
            VulkanExecutor(plan(g, inplace=False))
    finally:
        vulkan.ctx.float64 = had
    # PyTorch's dynamic Linear in one node without shaderFloat64 (vulkan_pipeline leaves its
    # traced ops there)
    arrays, attrs, out_shape = _torch_linear((3, 8), 5, False)
    g = _graph("qlinear_dynamic", arrays, attrs, out_shape, D.float32)
    vulkan.ctx.float64, had = False, vulkan.ctx.float64
    try:
        with pytest.raises(DeviceError, match="qlinear_dynamic of float32.*shaderFloat64"):
            VulkanExecutor(plan(g, inplace=False))
    finally:
        vulkan.ctx.float64 = had
    # qlinear_dynamic's weights must be constants (packed once)
    g = _dynamic_graph((3, 8), 5, ["lin"])
    w_in = g.add_input("w_in", (5, 8), D.int8)
    lin = g.producer[g.outputs[0]]
    g.set_input(lin, 1, w_in)
    with pytest.raises(DeviceError, match="qlinear_dynamic of uint8.*constants.*device='cpu'"):
        VulkanExecutor(plan(g, inplace=False))
    # the stream works as before after the refusal
    y = gpucore.ones(8).to("vulkan") * 3
    np.testing.assert_array_equal(y.cpu().numpy(), np.full(8, 3.0, np.float32))


# ------------------------------------------------------------------ dynamic quantization
def _dynamic_graph(shape, n, outputs, bias=True):
    """x -> DynamicQuantizeLinear (y, scale, zero point) -> qlinear_dynamic and qmatmul_integer
    with the traced zero point; ``outputs``: which tensors the graph returns."""
    r = np.random.default_rng(3)  # the same constants for both executors
    k = shape[-1]
    g = Graph()
    x = g.add_input("x", shape, D.float32)
    dql = [
        g.add_node("dynamic_quantize_linear", [x], s, dt, {"output_index": i}).output
        for i, (s, dt) in enumerate([(shape, D.uint8), ((), D.float32), ((), D.uint8)])
    ]
    y, s, z = dql
    w = g.add_constant(r.integers(-128, 128, (n, k), dtype=np.int8))
    ws = g.add_constant(r.uniform(0.001, 0.02, n).astype(np.float32))
    extra = [g.add_constant(r.standard_normal(n).astype(np.float32))] if bias else []
    out_shape = tuple(shape[:-1]) + (n,)
    lin = g.add_node("qlinear_dynamic", [y, w, s, z, ws, *extra], out_shape, D.float32, {})
    acc = g.add_node("qmatmul_integer", [y, w, z], out_shape, D.int32, {"a_zero_point": 0})
    names = {"lin": lin.output, "acc": acc.output, "y": y, "scale": s, "zp": z}
    g.outputs = [names[o] for o in outputs]
    return g


def _run_both(shape, n, outputs, inputs, bias=True):
    from gpucore.runtime.executors.vulkan import VulkanExecutor

    cpu = CompiledExecutor(plan(_dynamic_graph(shape, n, outputs, bias)))
    dev = VulkanExecutor(plan(_dynamic_graph(shape, n, outputs, bias), inplace=False))
    for x in inputs:
        for got, want, name in zip(dev.run([x]), cpu.run([x]), outputs):
            assert_bits(got, want, f"{name} of {list(x.shape)}")
    return dev


@pytest.mark.parametrize("shape,n", [((1, 1), 1), ((3, 5), 7), ((2, 17, 33), 9), ((64, 100), 50),
                                     ((2, 1000), 3), ((300, 64), 130)])  # fmt: skip
def test_dynamic_quantization_nodes_equal_the_cpu(vulkan, shape, n):
    if not vulkan.ctx.float64:
        pytest.skip(f"{vulkan.ctx.info.name} has no shaderFloat64")
    x = (RNG.standard_normal(shape) * 3).astype(np.float32)
    special = x.copy().reshape(-1)
    special[: min(special.size, 4)] = [np.inf, -2.0, 1e-40, -0.0][: special.size]
    nan = x.copy().reshape(-1)
    nan[-1] = np.nan
    inputs = [x, x * 1e-3, np.abs(x), special.reshape(shape), nan.reshape(shape)]
    outputs = ["lin", "acc", "y", "scale", "zp"]
    _run_both(shape, n, outputs, inputs)
    _run_both(shape, n, ["lin"], inputs[:2], bias=False)


def test_gemms_read_the_parameters_where_they_were_computed(vulkan):
    """With only the GEMMs reading the scale and zero point, their nodes write nothing (the
    GEMMs read DynamicQuantizeLinear's workspace): two dispatches fewer than when the graph
    returns them too, the same bits."""
    if not vulkan.ctx.float64:
        pytest.skip(f"{vulkan.ctx.info.name} has no shaderFloat64")
    x = RNG.standard_normal((5, 40)).astype(np.float32)
    direct = _run_both((5, 40), 6, ["lin", "acc"], [x])
    copied = _run_both((5, 40), 6, ["lin", "acc", "scale", "zp"], [x])
    assert copied.dispatches() == direct.dispatches() + 2


def test_dynamic_quantization_at_every_batch(vulkan):
    """ONNX Runtime's quantize_dynamic MLP in runtime ops, compiled with a dynamic batch for
    Vulkan: every size equals the CPU's bits."""
    from gpucore.runtime import compile as rt_compile
    from gpucore.runtime.capture.trace import apply_runtime_op

    if not vulkan.ctx.float64:
        pytest.skip(f"{vulkan.ctx.info.name} has no shaderFloat64")
    r = np.random.default_rng(4)
    w = gpucore.from_numpy(r.integers(-127, 128, (12, 20), dtype=np.int8))
    ws = gpucore.from_numpy(r.uniform(0.001, 0.01, 12).astype(np.float32))

    def fn(x):
        y, s, z = (apply_runtime_op("dynamic_quantize_linear", [x], {"output_index": i})
                   for i in range(3))  # fmt: skip
        return apply_runtime_op("qlinear_dynamic", [y, w, s, z, ws], {}).relu()

    x0 = gpucore.from_numpy(r.standard_normal((3, 20)).astype(np.float32))
    models = [
        rt_compile(fn, [x0], device=d, dynamic_axes={"x": {0: "B"}}) for d in ("cpu", "vulkan")
    ]
    for b in (1, 3, 7):
        x = r.standard_normal((b, 20)).astype(np.float32)
        assert_bits(models[1].run_arrays([x])[0], models[0].run_arrays([x])[0], f"batch {b}")
    ops = {s.node.op for ex in models[1].executors() for s in ex.plan.steps}
    assert {"dynamic_quantize_linear", "qlinear_dynamic"} <= ops


# ------------------------------------------------ PyTorch's dynamic quantized Linear (float x)
def _torch_linear(shape, n, relu, bias=True, seed=5):
    """x [..., K] float32 -> the float-input qlinear_dynamic (one node) with random constants."""
    r = np.random.default_rng(seed)
    k = shape[-1]
    arrays = [np.zeros(shape, np.float32), r.integers(-128, 128, (n, k), dtype=np.int8),
              r.uniform(0.001, 0.02, n).astype(np.float32)]  # fmt: skip
    if bias:
        arrays.append(r.standard_normal(n).astype(np.float32))
    return arrays, {"relu": relu}, tuple(shape[:-1]) + (n,)


def _torch_inputs(shape):
    """Inputs for PyTorch's activation quantization: ordinary, all >= 0 / all < 0 (the zero
    point's ends), all equal (the eps floor), a huge dynamic range, subnormals, ties of the
    rounding, and the inputs the eager layer refuses (NaN everywhere: NaN, inf, a range that
    overflows float32)."""
    x = (RNG.standard_normal(shape) * 3).astype(np.float32)
    size = x.size
    huge = x.copy().reshape(-1)
    huge[0], huge[-1] = 3e37, -1e-30
    sub = np.full(size, 1e-40, np.float32)
    sub[::2] = -3e-45
    ties = (np.arange(size, dtype=np.float32) % 7 - 3) * np.float32(0.5)
    cases = [x, np.abs(x), -np.abs(x) - 1, np.full(shape, 2.5, np.float32), x * 1e-30,
             huge, sub, ties, np.zeros(shape, np.float32)]  # fmt: skip
    for special in ([np.nan], [np.inf], [-np.inf], [3e38, -3e38]):
        s = x.copy().reshape(-1)
        s[: len(special)] = special[:size]
        cases.append(s)
    return [c.reshape(shape) for c in cases]


SHAPES = [((1, 1), 1), ((1, 7), 5), ((3, 5), 7), ((2, 17, 33), 9), ((64, 100), 50),
          ((2, 1000), 3), ((300, 64), 130)]  # fmt: skip


@pytest.mark.parametrize("shape,n", SHAPES)
@pytest.mark.parametrize("relu", [False, True])
def test_float_input_qlinear_dynamic_equals_the_cpu(vulkan, shape, n, relu):
    """The float-input qlinear_dynamic on the device (PyTorch's parameters computed there, the
    uint8 rows, the GEMM reading them): the CPU executor's bits, which equal the node's numpy
    reference, on every input, NaN / inf and an overflowing range (all NaN) included; with and
    without bias; ranges reduced by one workgroup and by several (2000 and more elements)."""
    if not vulkan.ctx.float64:
        pytest.skip(f"{vulkan.ctx.info.name} has no shaderFloat64")
    from gpucore.runtime.executors.vulkan import VulkanExecutor

    for bias in (True, False):
        arrays, attrs, out_shape = _torch_linear(shape, n, relu, bias)
        g = _graph("qlinear_dynamic", arrays, attrs, out_shape, D.float32)
        cpu = CompiledExecutor(plan(g))
        dev = VulkanExecutor(plan(_graph("qlinear_dynamic", arrays, attrs, out_shape, D.float32),
                                  inplace=False))  # fmt: skip
        for i, x in enumerate(_torch_inputs(shape)):
            (want,) = cpu.run([x])
            ref = op_info("qlinear_dynamic").evaluate([x, *arrays[1:]], attrs)
            assert_bits(want, ref, f"CPU against the reference, input {i}")
            (got,) = dev.run([x])
            assert_bits(got, want, f"input {i} of {list(shape)}, bias={bias}")
            if np.isnan(torch_quantize_ref(x)[1]):  # an input eager refuses: NaN everywhere
                assert np.isnan(got).all() and i >= 9


def test_float_input_nodes_share_one_quantization_of_their_input(vulkan, monkeypatch):
    """Three quantize_dynamic Linears reading one x (Q / K / V projections): the CPU's bits, and
    x's PyTorch parameters and uint8 rows recorded once for the three GEMMs (memo, as
    DynamicQuantizeLinear's): one range pass and one quantization, and at least two
    dispatches fewer per extra reader than three Linears on three inputs."""
    if not vulkan.ctx.float64:
        pytest.skip(f"{vulkan.ctx.info.name} has no shaderFloat64")
    from gpucore import nn
    from gpucore.backends.vulkan.kernels import qdynamic as vk_dq
    from gpucore.quantization import quantize_dynamic

    gpucore.manual_seed(3)
    qkv = quantize_dynamic(nn.ModuleList([nn.Linear(24, 16) for _ in range(3)]), {nn.Linear})
    calls = {"dynamic_qparams": 0, "torch_quantize_rows": 0}
    for name in calls:
        real = getattr(vk_dq, name)

        def counted(*a, _real=real, _name=name, **k):
            calls[_name] += 1
            return _real(*a, **k)

        monkeypatch.setattr(vk_dq, name, counted)

    def shared(x):
        return tuple(lin(x) for lin in qkv)

    def separate(a, b, c):
        return tuple(lin(v) for lin, v in zip(qkv, (a, b, c)))

    x = gpucore.randn(5, 24)
    dev = gpucore.compile(shared, (x,), device="vulkan")
    assert calls == {"dynamic_qparams": 1, "torch_quantize_rows": 1}, calls
    ops = [s.node.op for ex in dev.executors() for s in ex.plan.steps]
    assert ops.count("qlinear_dynamic") == 3 and "amin" not in ops, ops
    cpu = gpucore.compile(shared, (x,), device="cpu")
    for v in _torch_inputs((5, 24)):
        for got, want in zip(dev.run_arrays([v]), cpu.run_arrays([v])):
            assert_bits(got, want)
    apart = gpucore.compile(separate, (x, x.clone(), x.clone()), device="vulkan")
    assert calls == {"dynamic_qparams": 4, "torch_quantize_rows": 4}, calls
    d_shared, d_apart = (m.executors()[0].dispatches() for m in (dev, apart))
    assert d_apart >= d_shared + 4, (d_shared, d_apart)
