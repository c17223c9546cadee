"""cumsum and cumprod on the Vulkan device (kernels/scan.py, shaders/scan.comp) against the CPU
path bit for bit: float32 (NaN, inf, rounding that shows the summation order), int32 and int64
(wrapping products, carries across the 32-bit words), every dim, strided inputs, the gradient;
lanes above the length limit stay on the host."""

from __future__ import annotations

import numpy as np
import pytest
from device_helpers import RNG, dev, dev_view, on_cpu, ran_on_device

import gpucore
from gpucore.backends.vulkan.kernels import scan as vk_scan


def data(dtype, *shape):
    if dtype == np.float32:
        a = (RNG.standard_normal(shape) * 1e3).astype(np.float32)  # rounding shows the order
        flat = a.reshape(-1)
        flat[::97] = np.nan
        flat[5::89] = np.inf
        return a
    if dtype == np.int64:  # carries between the words; products wrap
        return RNG.integers(-(1 << 40), 1 << 40, shape, dtype=np.int64)
    return RNG.integers(-(1 << 20), 1 << 20, shape, dtype=np.int32)


def same_as_cpu(fn, name, x_dev, x_host):
    with gpucore.dispatch.trace_ops() as ops:
        got = fn(x_dev).cpu().numpy()
    ran_on_device(ops, name)
    with np.errstate(over="ignore"):
        want = on_cpu(fn, gpucore.tensor(x_host)).numpy()
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int64])
@pytest.mark.parametrize("op", ["cumsum", "cumprod"])
@pytest.mark.parametrize("dim", [0, 1, 2])
def test_scans_every_dim_and_dtype(vulkan, dtype, op, dim):
    x = data(dtype, 12, 30, 20)
    fn = getattr(gpucore, op)
    same_as_cpu(lambda t: fn(t, dim, dtype=t.dtype), op, dev(x), x)


def test_scan_of_a_strided_input(vulkan):
    x = data(np.float32, 80, 70)
    same_as_cpu(lambda t: gpucore.cumsum(t, 1), "cumsum", dev_view(x, lambda a: a.T), x.T)


def test_cumsum_gradient_on_the_device(vulkan):
    x = RNG.standard_normal((64, 90)).astype(np.float32)
    t = dev(x).requires_grad_()
    gpucore.cumsum(t, 1).sum().backward()
    want = np.broadcast_to(np.arange(90, 0, -1, dtype=np.float32), x.shape)
    np.testing.assert_array_equal(t.grad.cpu().numpy(), want)


def test_lanes_above_the_limit_stay_on_the_host(vulkan, monkeypatch):
    monkeypatch.setattr(vk_scan, "MAX_LANE", 100)
    x = data(np.float32, 50, 120)
    with gpucore.dispatch.trace_ops() as ops:
        got = gpucore.cumsum(dev(x), 1).cpu().numpy()
    assert not any(n == "cumsum" and b == "vulkan" for n, b, _ in ops), ops
    np.testing.assert_array_equal(got, np.cumsum(x, 1))
