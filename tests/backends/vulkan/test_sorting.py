"""topk on the Vulkan device (kernels/sorting.py, shaders/sorting.comp) against the order rule
of ``gpucore.ops.sorting._np_argsort`` (stable, NaN the greatest) and the CPU path, bit for bit:
float32 with NaN, infinities and signed zeros, int32 and int64 with ties, every dim, largest and
smallest, k from 0 to the whole row, strided inputs, the gradient; long rows stay on the host."""

from __future__ import annotations

import numpy as np
import pytest
from device_helpers import RNG, VIEWS, dev, dev_view, on_cpu, ran_on_device

import gpucore
from gpucore.backends.vulkan.kernels import sorting as vk_sorting
from gpucore.ops.sorting import _np_topk


def data(dtype, *shape):
    """Values with many ties (and, for float32, NaN, +-inf and both zeros among them)."""
    if dtype == np.float32:
        a = np.round(RNG.uniform(-4, 4, shape)).astype(np.float32)
        flat = a.reshape(-1)
        flat[::7] = np.nan
        flat[1::11] = -0.0
        flat[2::13] = np.inf
        flat[3::17] = -np.inf
        return a
    a = RNG.integers(-5, 5, shape, dtype=dtype)
    return a * (1 << 33) + 3 if dtype == np.int64 else a  # int64: the high words differ


def topk_on_device(x_t, k, dim, largest):
    with gpucore.dispatch.trace_ops() as ops:
        v, i = gpucore.topk(x_t, k, dim, largest)
    ran_on_device(ops, "topk")
    assert v.device.type == "vulkan" and i.device.type == "vulkan"
    return v.cpu().numpy(), i.cpu().numpy()


def assert_same_bits(got: np.ndarray, want: np.ndarray):
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(
        np.ascontiguousarray(got).view(np.uint8), np.ascontiguousarray(want).view(np.uint8)
    )


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int64])
@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize("dim", [0, 1, 2])
def test_topk_every_dim_and_dtype(vulkan, dtype, largest, dim):
    x = data(dtype, 16, 24, 12)
    for k in (0, 1, 5, x.shape[dim]):
        v, i = topk_on_device(dev(x), k, dim, largest)
        want_v, want_i = _np_topk(x, k, dim, largest)
        assert_same_bits(i, want_i.astype(np.int64))
        assert_same_bits(v, want_v)
        cpu_v, cpu_i = on_cpu(gpucore.topk, gpucore.tensor(x), k, dim, largest)
        assert_same_bits(v, cpu_v.numpy())
        assert_same_bits(i, cpu_i.numpy())


@pytest.mark.parametrize("largest", [True, False])
def test_topk_long_rows_match_the_cpu_partition_path(vulkan, largest):
    # 4k < n: the CPU selects by partition, ties at the k-th value by index like the full sort
    x = data(np.float32, 3, 5000)
    v, i = topk_on_device(dev(x), 9, 1, largest)
    want_v, want_i = _np_topk(x, 9, 1, largest)
    assert_same_bits(i, want_i.astype(np.int64))
    cpu_v, cpu_i = on_cpu(gpucore.topk, gpucore.tensor(x), 9, 1, largest)
    assert_same_bits(v, cpu_v.numpy())
    assert_same_bits(i, cpu_i.numpy())


@pytest.mark.parametrize("view", ["transpose", "negative", "expand_col"])
def test_topk_of_strided_inputs(vulkan, view):
    x = data(np.float32, 72, 90)
    vx = VIEWS[view](x)
    v, i = topk_on_device(dev_view(x, VIEWS[view]), 4, 1, True)
    want_v, want_i = _np_topk(np.ascontiguousarray(vx), 4, 1, True)
    assert_same_bits(i, want_i.astype(np.int64))
    assert_same_bits(v, want_v)


def test_topk_gradient_reaches_the_chosen_elements(vulkan):
    x = RNG.standard_normal((64, 80)).astype(np.float32)  # no ties: the gradient is unique
    t = dev(x).requires_grad_()
    v, i = gpucore.topk(t, 3, 1)
    (v * 2.0).sum().backward()
    want = np.zeros_like(x)
    np.put_along_axis(want, np.argsort(-x, 1, kind="stable")[:, :3], 2.0, 1)
    np.testing.assert_array_equal(t.grad.cpu().numpy(), want)


def test_rows_above_the_work_limit_run_on_the_host(vulkan, monkeypatch):
    monkeypatch.setattr(vk_sorting, "MAX_ROW_WORK", 100)
    x = data(np.float32, 40, 200)
    with gpucore.dispatch.trace_ops() as ops:
        v, i = gpucore.topk(dev(x), 3, 1)
    assert not any(n == "topk" and b == "vulkan" for n, b, _ in ops), ops
    want_v, want_i = _np_topk(x, 3, 1, True)
    assert_same_bits(i.cpu().numpy(), want_i.astype(np.int64))
