"""gather on the Vulkan device (kernels/indexing.py, shaders/gather.comp) against numpy's
take_along_axis and the CPU path: every dim, an index smaller than the input in the other dims,
float32 bits (NaN, inf, signed zeros) copied exactly, int32/int64/int8/bool data, strided inputs
and broadcast (stride-0) indices, empty indices, the gradient, and out-of-range indices: the
CPU's IndexError for a host index, NaN / 0 (never a read out of bounds) for one on the device."""

from __future__ import annotations

import numpy as np
import pytest
from device_helpers import RNG, VIEWS, dev, dev_view, on_cpu, ran_on_device, rand

import gpucore
from gpucore.errors import GpucoreIndexError


def data(dtype, *shape):
    if dtype == np.float32:
        a = rand(*shape)
        flat = a.reshape(-1)
        flat[:5] = np.float32([np.nan, np.inf, -np.inf, -0.0, 1e-45])[: flat.size]
        return a
    if dtype == np.bool_:
        return RNG.random(shape) > 0.5
    info = np.iinfo(dtype)
    return RNG.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)


def ref(x, index, dim):
    sl = tuple(slice(0, s) if d != dim else slice(None) for d, s in enumerate(index.shape))
    return np.take_along_axis(x[sl], index, axis=dim)


def assert_same_bits(got: np.ndarray, want: np.ndarray):
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(
        np.ascontiguousarray(got).view(np.uint8), np.ascontiguousarray(want).view(np.uint8)
    )


def gather_on_device(x_t, dim, index_t):
    with gpucore.dispatch.trace_ops() as ops:
        out = gpucore.gather(x_t, dim, index_t)
    ran_on_device(ops, "gather")
    assert out.device.type == "vulkan"
    return out.cpu().numpy()


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int64, np.int8, np.bool_])
@pytest.mark.parametrize("dim", [0, 1, 2])
def test_gather_every_dim_and_dtype(vulkan, dtype, dim):
    x = data(dtype, 6, 7, 9)
    ishape = [5, 6, 8]  # smaller than x in the other dims ...
    ishape[dim] = 11  # ... and longer along dim (indices repeat)
    index = RNG.integers(0, x.shape[dim], ishape)
    got = gather_on_device(dev(x), dim, dev(index))
    assert_same_bits(got, ref(x, index, dim))
    want_cpu = on_cpu(gpucore.gather, gpucore.tensor(x), dim, gpucore.tensor(index)).numpy()
    assert_same_bits(got, want_cpu)


@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.bool_])
def test_gather_large(vulkan, dtype):
    x = data(dtype, 37, 4099)
    index = RNG.integers(0, 4099, (37, 5001))
    assert_same_bits(gather_on_device(dev(x), 1, dev(index)), ref(x, index, 1))
    index = RNG.integers(0, 37, (64, 4099))  # along dim 0, longer than x
    assert_same_bits(gather_on_device(dev(x), 0, dev(index)), ref(x, index, 0))


@pytest.mark.parametrize("view", sorted(VIEWS))
def test_gather_from_strided_inputs(vulkan, view):
    x = data(np.float32, 40, 90)
    vx = VIEWS[view](x)
    for dim in (0, 1):
        index = RNG.integers(0, vx.shape[dim], (vx.shape[0] - 1, vx.shape[1] - 2))
        got = gather_on_device(dev_view(x, VIEWS[view]), dim, dev(index))
        assert_same_bits(got, ref(vx, index, dim))
        # and a strided index (VIEWS[view] of a larger index array)
        big = RNG.integers(0, vx.shape[dim], (40, 90))
        vi = VIEWS[view](big)
        got = gather_on_device(dev_view(x, VIEWS[view]), dim, dev_view(big, VIEWS[view]))
        assert_same_bits(got, ref(vx, vi, dim))


def test_index_select_shaped_gather_with_a_broadcast_index(vulkan):
    # what index_select lowers to in captured graphs: a 1-D index expanded along the other dims
    x = data(np.float32, 50, 130)
    rows = RNG.integers(0, 50, 70)
    index = dev(rows.reshape(-1, 1)).expand(70, 130)
    assert_same_bits(gather_on_device(dev(x), 0, index), x[rows])


def test_gather_empty_index(vulkan):
    x = data(np.float32, 4, 5)
    got = gather_on_device(dev(x), 1, dev(np.zeros((4, 0), np.int64)))
    assert got.shape == (4, 0)


def test_gather_gradient_equals_cpu(vulkan):
    x = rand(30, 200)
    index = RNG.integers(0, 200, (30, 300))
    w = rand(30, 300)
    tx = dev(x).requires_grad_()
    (gpucore.gather(tx, 1, dev(index)) * dev(w)).sum().backward()
    cx = gpucore.tensor(x).requires_grad_()
    on_cpu(
        lambda: (gpucore.gather(cx, 1, gpucore.tensor(index)) * gpucore.tensor(w)).sum().backward()
    )
    np.testing.assert_allclose(tx.grad.cpu().numpy(), cx.grad.numpy(), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("bad", [-1, 200, 2**32, -(2**40)])
def test_out_of_range_host_index_raises_the_cpu_error(vulkan, bad):
    x = dev(rand(3, 200))
    index = RNG.integers(0, 200, (3, 5000))
    index[1, 7] = bad
    with pytest.raises(GpucoreIndexError, match=r"gather\(\): index values must be in \[0, 200\)"):
        gpucore.gather(x, 1, gpucore.tensor(index))
    with pytest.raises(GpucoreIndexError, match=r"gather\(\): index values must be in \[0, 200\)"):
        on_cpu(gpucore.gather, x.cpu(), 1, gpucore.tensor(index))


@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.int32, np.bool_])
def test_out_of_range_device_index_never_reads_out_of_bounds(vulkan, dtype):
    # the index lives on the device: not read back; its bad elements are NaN (float) or 0
    x = data(dtype, 3, 200)
    index = RNG.integers(0, 200, (3, 5000))
    bad = [(0, 0, -1), (1, 7, 200), (2, 4999, 2**32), (1, 100, -(2**40)), (0, 9, 2**31)]
    for i, j, v in bad:
        index[i, j] = v
    got = gather_on_device(dev(x), 1, dev(index))
    ok = (index >= 0) & (index < 200)
    want = ref(x, np.where(ok, index, 0), 1)
    want[~ok] = np.nan if dtype == np.float32 else 0
    assert_same_bits(got, want)
