"""The dynamic quantized Linear under a capture (gpucore/quantization/traced.py): its activation
quantization recorded as graph ops (which the CPU pipeline fuses into one qlinear_dynamic node
per layer), so a compiled ``quantize_dynamic`` model gives the eager model's outputs bit for bit
on inputs other than the example (it used to freeze the example's)."""

from __future__ import annotations

import numpy as np
import pytest

import gpucore as gc
from gpucore import nn
from gpucore.quantization import kernels, quantize_dynamic
from gpucore.quantization.traced import quantize_activation_ops


def _model(seed=0):
    gc.manual_seed(seed)
    m = nn.Sequential(nn.Linear(24, 40), nn.ReLU(), nn.Linear(40, 8, bias=False))
    return quantize_dynamic(m, {nn.Linear})


def _inputs(shape, n=3, seed=1):
    rng = np.random.default_rng(seed)
    xs = [rng.standard_normal(shape).astype(np.float32) * s for s in (0.5, 3.0, 40.0)]
    xs[1] = np.abs(xs[1])  # all >= 0: zero point 0
    return xs[:n]


def _eager(q, x: np.ndarray) -> np.ndarray:
    with gc.no_grad():
        return q(gc.tensor(x)).numpy()


@pytest.mark.parametrize("executor", ["compiled", "interpreted"])
def test_compiled_quantize_dynamic_model_equals_eager_bitwise_on_new_inputs(executor):
    q = _model()
    cm = gc.compile(q, (gc.randn(5, 24),), device="cpu", executor=executor)
    ops = [n.op for n in cm.graph.order()]
    # each layer's traced quantization fused into one float-input node, the ReLU into the first
    # (runtime/passes/dynamic_linear.py)
    assert ops.count("qlinear_dynamic") == 2 and "amin" not in ops and "relu" not in ops, ops
    if executor == "compiled":
        assert all(ex.python_steps == 0 for ex in cm.executors())  # one C program
    outs = []
    for x in _inputs((5, 24)):
        got = cm(gc.tensor(x)).numpy()
        np.testing.assert_array_equal(got, _eager(q, x))
        outs.append(got)
    assert not np.array_equal(outs[0], outs[1])  # not one frozen answer


def test_dynamic_batch_and_lazy_compile_equal_eager():
    q = _model(3)
    cm = gc.compile(q, (gc.randn(2, 24),), device="cpu", dynamic_axes={"input": {0: "batch"}})
    lazy = gc.compile(q)
    for i, x in enumerate(_inputs((7, 24))):
        x = x[: 3 + 2 * i]
        np.testing.assert_array_equal(cm(gc.tensor(x)).numpy(), _eager(q, x))
        with gc.no_grad():
            for _ in range(2):  # the second call runs the compiled graph
                np.testing.assert_array_equal(lazy(gc.tensor(x)).numpy(), _eager(q, x))
    stats = lazy.stats()  # the lazy capture compiled it (it used to refuse, running eagerly)
    assert stats["compiles"] == 3 and stats["compiled"] >= 3 and not stats["fallbacks"], stats


@pytest.mark.parametrize(
    "x",
    [
        np.zeros((2, 3), np.float32),  # hi == lo: the eps floor
        np.full((1, 4), 1e-8, np.float32),  # a range below 255 * eps
        np.array([[-3.0, -1.0, -0.5]], np.float32),  # all < 0: zero point 255
        np.array([[0.0, 2.5, 255.0, -0.5]], np.float32),  # ties of the rounding
        np.random.default_rng(5).standard_normal((6, 33)).astype(np.float32) * 1e4,
    ],
)
def test_activation_ops_are_kernels_quantize_activation(x):
    q, scale, zp = quantize_activation_ops(gc.tensor(x))
    want_q, want_scale, want_zp = kernels.quantize_activation(x)
    assert scale.dtype is gc.float32 and zp.dtype is gc.uint8 and q.dtype is gc.uint8
    assert scale.item() == want_scale and zp.item() == want_zp
    np.testing.assert_array_equal(q.numpy(), want_q)


def _vulkan_ops(cm) -> list:
    return [s.node.op for ex in cm.executors() for s in ex.plan.steps]


def test_vulkan_compiled_model_equals_eager(vulkan):
    """On a device with shaderFloat64 each layer runs as one float-input qlinear_dynamic (the
    shaders of executors/vulkan_quant.py), the ReLU in the first one's epilogue; without it,
    as the traced primitives (the ReLU then in the uint8 form's epilogue): eager's bits
    either way, at the example's batch and others."""
    q = _model(7)
    cm = gc.compile(q, (gc.randn(4, 24),), device="vulkan", dynamic_axes={"input": {0: "b"}})
    xs = _inputs((4, 24)) + [_inputs((1, 24))[1], _inputs((9, 24))[2]]
    for x in xs:
        np.testing.assert_array_equal(cm(gc.tensor(x)).numpy(), _eager(q, x))
    ops = _vulkan_ops(cm)
    if vulkan.ctx.float64:
        assert ops.count("qlinear_dynamic") == 3 * 2 and "amin" not in ops and "relu" not in ops
    had = vulkan.ctx.float64
    vulkan.ctx.float64 = False  # (what the passes see; the traced ops need no float64 shader)
    try:
        traced_cm = gc.compile(q, (gc.randn(4, 24),), device="vulkan")
        ops = _vulkan_ops(traced_cm)
    finally:
        vulkan.ctx.float64 = had
    assert "amin" in ops and "qlinear_dynamic" in ops, ops
    for x in xs[:3]:
        np.testing.assert_array_equal(traced_cm(gc.tensor(x)).numpy(), _eager(q, x))


def test_capture_of_device_inputs_records_the_same_graph(vulkan):
    """Example inputs on the Vulkan device: the ops' own reads of device tensors (run on the
    CPU) are the recorded nodes', not host reads of the model's, so the capture goes through."""
    from gpucore.runtime.capture.trace import trace
    from gpucore.runtime.model import compile_graph

    q = _model(9)
    example, x = _inputs((3, 24))[0], _inputs((3, 24))[2]
    g = trace(q, [gc.tensor(example).to("vulkan")])
    assert [n.op for n in g.order()].count("qlinear_dynamic") == 2
    cm = compile_graph(g, [example], device="cpu")
    np.testing.assert_array_equal(cm(gc.tensor(x)).numpy(), _eager(q, x))
