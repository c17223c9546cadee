"""scatter, scatter_add and scatter_reduce on the Vulkan device (kernels/scatter.py,
shaders/scatter.comp) against the CPU path bit for bit: every dim, duplicate indices (the last
write wins; sums and products in the index's order), an index smaller than the input off dim,
every reduction with and without include_self, NaN and signed zeros in amax / amin, int32 and
int64 data for scatter, strided operands, gather's gradient (a scatter_add) on the device, and a
host index out of range raising the CPU's IndexError."""

from __future__ import annotations

import numpy as np
import pytest
from device_helpers import RNG, dev, dev_view, on_cpu, ran_on_device

import gpucore
from gpucore.errors import GpucoreIndexError


def floats(*shape):
    a = np.round(RNG.uniform(-3, 3, shape), 1).astype(np.float32)
    flat = a.reshape(-1)
    flat[::13] = np.nan
    flat[1::7] = 0.0
    flat[2::7] = -0.0
    flat[3::17] = np.inf
    return a


def index_for(xshape, dim, ishape):
    return RNG.integers(0, xshape[dim], ishape)  # short ranges: many duplicates


def assert_same_bits(got: np.ndarray, want: np.ndarray):
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(
        np.ascontiguousarray(got).view(np.uint8), np.ascontiguousarray(want).view(np.uint8)
    )


def on_device_and_cpu(fn, name, *arrays):
    with gpucore.dispatch.trace_ops() as ops:
        got = fn(*[dev(a) for a in arrays]).cpu().numpy()
    ran_on_device(ops, name)
    want = on_cpu(fn, *[gpucore.tensor(a) for a in arrays]).numpy()
    assert_same_bits(got, want)
    return got


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int64])
@pytest.mark.parametrize("dim", [0, 1, 2])
def test_scatter_last_write_wins(vulkan, dtype, dim):
    x = floats(12, 20, 24) if dtype == np.float32 else RNG.integers(-50, 50, (12, 20, 24), dtype)
    if dtype == np.int64:
        x = x * (1 << 35)
    ishape = [10, 18, 20]
    ishape[dim] = 30  # longer than x along dim: indices repeat
    index = index_for(x.shape, dim, ishape)
    scale = 3 if dtype != np.int64 else 1 << 34
    src = (RNG.integers(-100, 100, [n + 1 for n in ishape]) * scale).astype(dtype)
    on_device_and_cpu(lambda a, i, s: gpucore.scatter(a, dim, i, s), "scatter", x, index, src)


@pytest.mark.parametrize("dim", [0, 1])
def test_scatter_add_sums_in_index_order(vulkan, dim):
    x = RNG.standard_normal((70, 90)).astype(np.float32)
    index = index_for(x.shape, dim, (60, 80) if dim else (200, 80))
    src = (RNG.standard_normal(index.shape) * 1e4).astype(np.float32)  # rounding shows order
    on_device_and_cpu(
        lambda a, i, s: gpucore.scatter_add(a, dim, i, s), "scatter_add", x, index, src
    )


@pytest.mark.parametrize("reduce", ["sum", "prod", "amax", "amin", "mean"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce_every_reduction(vulkan, reduce, include_self):
    x = floats(40, 150)
    index = index_for(x.shape, 1, (40, 120))
    src = floats(40, 120)
    if reduce == "prod":
        x, src = RNG.uniform(0.5, 2, x.shape), RNG.uniform(0.5, 2, src.shape)  # finite products
        x, src = x.astype(np.float32), src.astype(np.float32)

    def fn(a, i, s):
        return gpucore.scatter_reduce(a, 1, i, s, reduce, include_self=include_self)

    on_device_and_cpu(fn, "scatter_reduce", x, index, src)


def test_scatter_of_strided_operands(vulkan):
    x = floats(64, 96)
    index = RNG.integers(0, 96, (64, 96))  # transposed: an index into dim 0 of x.T
    src = floats(64, 96)
    t = lambda a: a.T  # noqa: E731
    with gpucore.dispatch.trace_ops() as ops:
        got = (
            gpucore.scatter_add(dev_view(x, t), 0, dev_view(index, t), dev_view(src, t))
            .cpu()
            .numpy()
        )
    ran_on_device(ops, "scatter_add")
    want = on_cpu(
        gpucore.scatter_add, gpucore.tensor(x.T), 0, gpucore.tensor(index.T), gpucore.tensor(src.T)
    ).numpy()
    assert_same_bits(got, want)


def test_gather_gradient_is_a_scatter_add_on_the_device(vulkan):
    x = RNG.standard_normal((64, 100)).astype(np.float32)
    index = index_for(x.shape, 1, (64, 150))
    t = dev(x).requires_grad_()
    with gpucore.dispatch.trace_ops() as ops:
        (gpucore.gather(t, 1, dev(index)) * 3.0).sum().backward()
    ran_on_device(ops, "scatter_add")
    want = np.zeros_like(x)
    np.add.at(want, (np.arange(64)[:, None], index), 3.0)
    np.testing.assert_array_equal(t.grad.cpu().numpy(), want)


def test_a_host_index_out_of_range_raises_the_cpu_error(vulkan):
    x = dev(floats(64, 80))
    bad = gpucore.tensor(np.full((64, 80), 80, np.int64))
    with pytest.raises(GpucoreIndexError, match="scatter_add"):
        gpucore.scatter_add(x, 1, bad, dev(floats(64, 80)))


def test_long_walks_stay_on_the_host(vulkan, monkeypatch):
    from gpucore.backends.vulkan.kernels import scatter as vk_scatter

    monkeypatch.setattr(vk_scatter, "MAX_WORK", 1000)
    x = RNG.standard_normal((64, 100)).astype(np.float32)
    index = index_for(x.shape, 1, (64, 150))
    src = RNG.standard_normal(index.shape).astype(np.float32)
    with gpucore.dispatch.trace_ops() as ops:
        got = gpucore.scatter_add(dev(x), 1, dev(index), dev(src)).cpu().numpy()
    assert not any(n == "scatter_add" and b == "vulkan" for n, b, _ in ops), ops
    want = x.copy()
    np.add.at(want, (np.arange(64)[:, None], index), src)
    np.testing.assert_array_equal(got, want)
