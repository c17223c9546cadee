"""Unary elementwise Vulkan kernels against the CPU path: the strided ones binary.comp runs
(logical_not, clamp, dtype casts, log1p) and unary.comp's math functions and activations, with
their backward, on non-contiguous inputs. The binary family (binary.comp, where.comp) is in
test_elementwise.py.

Every test runs the op on the device (the ``vulkan`` fixture) and on the CPU and compares; where
the CPU kernel and the shader must agree bit for bit (logical_not, clamp, casts, log1p's special
values) the tolerance is zero. Each test runs twice: with elementwise fusion (contiguous float32
ops go through fused.comp programs) and without (each op its own kernel).
"""

from __future__ import annotations

import numpy as np
import pytest
from device_helpers import (
    RNG,
    VIEWS,
    assert_close_to_cpu,
    assert_same_floats,
    dev,
    dev_view,
    fusion_mode,  # noqa: F401  (a fixture, used by name)
    on_cpu,
    ran_on_device,
    rand,
)
from helpers import op_reference

import gpucore
from gpucore import _cpu
from gpucore.ops.registry import REGISTRY

# every test here runs with elementwise fusion on and off (device_helpers.fusion_mode)
pytestmark = pytest.mark.usefixtures("fusion_mode")


# ----------------------------------------------------------------------------- logical_not
@pytest.mark.parametrize("dtype", [np.bool_, np.float32, np.int32])
def test_logical_not(vulkan, dtype):
    a = np.array([0, 1, 2, -1, 0, 5, 0], dtype)
    if dtype == np.float32:
        a = np.float32([0.0, -0.0, np.nan, np.inf, 1e-30, -2.0, 0.0])
    ops = assert_close_to_cpu(lambda t: t.logical_not(), [dev(a)], rtol=0, atol=0)
    ran_on_device(ops, "logical_not")


# ----------------------------------------------------------------------------- clamp
@pytest.mark.parametrize(
    "bounds",
    [
        (-0.5, 0.5),
        (None, 0.25),
        (-0.25, None),
        (0, 1),
        (-np.inf, np.inf),
        (1.0, -1.0),
        (float("nan"), None),
        (None, float("nan")),
    ],
)
def test_clamp(vulkan, bounds):
    a = rand(4097)
    a[::11] = np.nan
    a[5], a[6] = np.inf, -np.inf
    lo, hi = bounds
    x = dev(a)
    ops = assert_close_to_cpu(lambda t: t.clamp(lo, hi), [x], rtol=0, atol=0)
    ran_on_device(ops, "clamp")
    assert_close_to_cpu(lambda t: t.t().clamp(lo, hi), [dev(rand(30, 20))], rtol=0, atol=0)


def test_clamp_gradient(vulkan):
    a = rand(300)
    x = dev(a).requires_grad_()
    x.clamp(-0.5, 0.7).sum().backward()
    want = ((a >= -0.5) & (a <= 0.7)).astype(np.float32)
    np.testing.assert_array_equal(x.grad.numpy(), want)


# ----------------------------------------------------------------------------- casts
CASTS = [
    (np.float32, "int"),
    (np.float32, "bool"),
    (np.bool_, "float"),
    (np.bool_, "int"),
    (np.int32, "float"),
    (np.int32, "bool"),
]


def cast_input(src):
    if src == np.float32:
        a = rand(4097, lo=-1e6, hi=1e6)
        a[:8] = [0.0, -0.0, 0.5, -0.5, 1.99, -1.99, 2.0**30, -(2.0**31)]
        return a
    if src == np.bool_:
        return rand(4097) > 0
    a = RNG.integers(-(2**31), 2**31 - 1, 4097, dtype=np.int32)
    a[:4] = [0, 1, -1, 2**24 + 1]
    return a


@pytest.mark.parametrize("src,dst", CASTS)
def test_to_dtype(vulkan, src, dst):
    x = dev(cast_input(src))
    fn = lambda t: getattr(t, dst)()  # noqa: E731
    ops = assert_close_to_cpu(fn, [x], rtol=0, atol=0)
    ran_on_device(ops, "to_dtype")
    assert_close_to_cpu(lambda t: fn(t[1::3]), [x], rtol=0, atol=0)  # strided input


def test_float_to_bool_nan_is_true(vulkan):
    a = np.float32([np.nan, 0.0, -0.0, np.inf, 1e-38])
    np.testing.assert_array_equal(dev(a).bool().numpy(), [True, False, False, True, True])


def test_float64_casts_run_where_the_device_has_float64(vulkan, monkeypatch):
    """binaryf64.comp casts on a device with shaderFloat64 / shaderInt64; elsewhere the CPU."""
    x = dev(rand(100))
    for has in (True, False) if vulkan.ctx.float64 else (False,):
        monkeypatch.setattr(vulkan.ctx, "float64", has)
        with gpucore.dispatch.trace_ops() as ops:
            y = x.double()
            z = x.long().double()
        where = "vulkan" if has else "cpu"
        assert [o[1] for o in ops if o[0] == "to_dtype"] == [where, "vulkan", where]
        # ...and the results go back where the input was: a dtype change keeps the device
        assert y.device.type == z.device.type == "vulkan"
        np.testing.assert_array_equal(y.numpy(), x.cpu().numpy().astype(np.float64))
        want = x.cpu().numpy().astype(np.int64).astype(np.float64)
        np.testing.assert_array_equal(z.numpy(), want)
    assert x.to(gpucore.float64, device="cpu").device.type == "cpu"


# ----------------------------------------------------------------------------- log1p
def test_log1p(vulkan):
    a = np.concatenate(
        [
            rand(1000, lo=-1e-6, hi=1e-6),
            rand(1000, lo=-0.99, hi=3.0),
            rand(1000, lo=3, hi=1e30),
            np.float32(
                [
                    0.0,
                    -0.0,
                    -1.0,
                    -1.5,
                    np.inf,
                    -np.inf,
                    np.nan,
                    1e-40,
                    2.0**24,
                    -0.2929,
                    0.4142,
                    0.41421357,
                ]
            ),
        ]
    )
    got = dev(a).log1p().numpy()
    with np.errstate(all="ignore"):
        ref = np.log1p(a.astype(np.float64))
    fin = np.isfinite(ref) & (ref != 0)
    rel = np.abs(got[fin] - ref[fin]) / np.abs(ref[fin])
    assert rel.max() < 2.5e-7, rel.max()
    assert_same_floats(got[~fin], on_cpu(lambda t: t.log1p(), gpucore.tensor(a)).numpy()[~fin])


# ----------------------------------------------------------------------------- unary ops
# every unary code of cpu/opcodes.def that is a registry op (gelu_tanh is gelu's tanh form)
UNARY = sorted(n for n in _cpu.OPCODES["unary"] if n in REGISTRY)


@pytest.mark.parametrize("view", VIEWS)
@pytest.mark.parametrize("name", UNARY)
def test_unary_non_contiguous(vulkan, name, view):
    _, lo, hi = op_reference(name)  # the domain its samples use (log: positive)
    x = dev_view(rand(24, 30, lo=lo, hi=hi), VIEWS[view])
    ops = assert_close_to_cpu(lambda t: getattr(t, name)(), [x], rtol=2e-6, atol=1e-6)
    ran_on_device(ops, name)


@pytest.mark.parametrize("name", ["relu", "sigmoid", "tanh", "gelu"])
def test_activation_backward_non_contiguous(vulkan, name):
    a = rand(20, 30)

    def f(t):
        t = t.detach().requires_grad_()
        y = getattr(t.t(), name)()
        y.backward(gpucore.ones(30, 20).to(t.device.type) * 0.5)
        return t.grad

    assert_close_to_cpu(f, [dev(a)], rtol=2e-6, atol=1e-6)
