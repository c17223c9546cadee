"""The Vulkan shaders agree with the CPU kernels on IEEE special values: NaN, +-inf, +-0,
subnormals and huge arguments (the CPU's C library behaviour is the reference), for every unary
op of cpu/opcodes.def, the activation gradients and the binary arithmetic; sin/cos reduce any
float32 argument exactly (Payne-Hanek), so they stay within 2 ulp of the float64 result."""

import numpy as np
import pytest

import gpucore
import gpucore.nn.functional as F
from gpucore import _cpu

SPECIAL = np.array(
    [
        np.nan,
        np.inf,
        -np.inf,
        0.0,
        -0.0,
        1e-45,
        -1e-45,
        1e-38,
        -1e-38,
        3e38,
        -3e38,
        88.8,
        -88.8,
        100.0,
        -100.0,
        1e-7,
        20.0,
        -20.0,
        0.5,
        -0.5,
        1e4,
        -1e4,
        10.0,
        -10.0,
        1.0,
        -1.0,
    ],
    np.float32,
)
# above the GPU threshold, so the policy cannot matter
X = np.tile(SPECIAL, 160)


TINY = np.finfo(np.float32).tiny


def _same(cpu: np.ndarray, dev: np.ndarray) -> np.ndarray:
    """Equal, both NaN, or within 2 float32 ulp or 1e-5 relative of each other: transcendentals
    round apart, and far in a tail such as gelu(-10) the float32 formula itself is only that well
    conditioned (exp of a rounded 87 is 1e-5 off). A subnormal result may be flushed to zero of
    its sign: Vulkan lets devices flush subnormal results (lavapipe and most GPUs do); subnormal
    inputs are decoded by the shaders."""
    cpu = np.where(np.abs(cpu) < TINY, np.copysign(0, cpu), cpu)
    dev = np.where(np.abs(dev) < TINY, np.copysign(0, dev), dev)
    with np.errstate(invalid="ignore"):
        ulp = np.spacing(np.maximum(np.abs(cpu), np.abs(dev)).astype(np.float32))
        close = np.abs(cpu - dev) <= np.maximum(2 * ulp, 1e-5 * np.abs(cpu))
        return (cpu == dev) | (np.isnan(cpu) & np.isnan(dev)) | close


def _both(fn, *arrays):
    with gpucore.device_policy("cpu"):
        c = fn(*[gpucore.tensor(a) for a in arrays]).numpy()
    with gpucore.device_policy("vulkan"):
        v = fn(*[gpucore.tensor(a) for a in arrays]).cpu().numpy()
    return c, v


def _report(name, inputs, c, v):
    bad = np.flatnonzero(~_same(c, v))[:8]
    return f"{name}: " + ", ".join(
        f"{tuple(float(a[i]) for a in inputs)} cpu {c[i]} vulkan {v[i]}" for i in bad
    )


UNARY = sorted(n for n in _cpu.OPCODES["unary"] if n != "gelu_tanh")


@pytest.mark.parametrize("name", UNARY)
def test_unary_ops_agree_on_special_values(vulkan, name):
    fn = getattr(gpucore, name) if hasattr(gpucore, name) else getattr(F, name)
    c, v = _both(fn, X)
    assert _same(c, v).all(), _report(name, [X], c, v)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_agrees_on_special_values(vulkan, approximate):
    c, v = _both(lambda t: F.gelu(t, approximate=approximate), X)
    assert _same(c, v).all(), _report("gelu", [X], c, v)
    assert np.signbit(v[np.isneginf(X)]).all() and (v[np.isneginf(X)] == 0).all()  # -0.0


@pytest.mark.parametrize("name", ["relu", "sigmoid", "tanh", "gelu"])
def test_activation_gradients_agree_on_special_values(vulkan, name):
    def grad(t):
        t.requires_grad_(True)
        y = getattr(F, name)(t)
        y.backward(gpucore.ones_like(y))
        return t.grad

    c, v = _both(grad, X)
    assert _same(c, v).all(), _report(f"{name} gradient", [X], c, v)


@pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "pow", "maximum", "minimum"])
def test_binary_ops_agree_on_special_values(vulkan, name):
    a = X
    b = np.roll(X, 7)
    c, v = _both(getattr(gpucore, name), a, b)
    assert _same(c, v).all(), _report(name, [a, b], c, v)


@pytest.mark.parametrize("name", ["sin", "cos"])
def test_sin_cos_are_accurate_for_every_float32_magnitude(vulkan, name):
    bits = np.random.default_rng(5).integers(0, 2**32, 60000, dtype=np.uint64).astype(np.uint32)
    x = bits.view(np.float32)
    x = x[np.isfinite(x)]
    with gpucore.device_policy("vulkan"):
        got = getattr(gpucore, name)(gpucore.tensor(x)).cpu().numpy().astype(np.float64)
    want = getattr(np, name)(x.astype(np.float64))
    ulp = np.spacing(np.abs(want).astype(np.float32)).astype(np.float64)
    err = np.abs(got - want) / ulp
    worst = int(np.argmax(err))
    assert err.max() <= 2, f"{name}({x[worst]!r}) = {got[worst]!r}, float64 {want[worst]!r}"


def test_log_of_subnormals_is_the_c_librarys(vulkan):
    x = np.tile(np.array([1e-45, 3e-42, 1e-39, 1.1e-38, -1e-45], np.float32), 1000)
    c, v = _both(gpucore.log, x)
    assert _same(c, v).all(), _report("log", [x], c, v)
    np.testing.assert_allclose(v[:4], np.log(x[:4].astype(np.float64)), rtol=1e-6)
    assert np.isnan(v[4])
