"""cat on the Vulkan device (kernels/joining.py: one strided copy per input into its slice of the
output, shaders/copy.comp) against numpy and the CPU path: every dim, float32 bits (NaN, inf,
signed zeros) copied exactly, int32/int64/int8/bool (bytes through copy.comp's byte mode, whose
inputs share 32-bit words of the output), strided and broadcast inputs, empty inputs, and the
gradient; each test with elementwise fusion on and off."""

from __future__ import annotations

import numpy as np
import pytest
from device_helpers import (
    RNG,
    VIEWS,
    dev,
    dev_view,
    fusion_mode,  # noqa: F401  (a fixture, used by name)
    on_cpu,
    ran_on_device,
    rand,
)

import gpucore

# with fusion on, contiguous float32 slices join the stream's fused.comp program as copies
pytestmark = pytest.mark.usefixtures("fusion_mode")


def specials(n: int) -> np.ndarray:
    a = rand(n)
    a[: min(n, 6)] = np.float32([np.nan, np.inf, -np.inf, -0.0, 1e-45, -3.4e38])[: min(n, 6)]
    return a


def data(dtype, *shape):
    n = int(np.prod(shape))
    if dtype == np.float32:
        return specials(n).reshape(shape)
    if dtype == np.bool_:
        return (RNG.random(shape) > 0.5).reshape(shape)
    info = np.iinfo(dtype)
    return RNG.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)


def cat_on_device(arrays, dim, views=None):
    ts = [dev(a) if views is None else dev_view(a, views) for a in arrays]
    with gpucore.dispatch.trace_ops() as ops:
        out = gpucore.cat(ts, dim)
    assert out.device.type == "vulkan"
    return out.cpu().numpy(), ops


def assert_same_bits(got: np.ndarray, want: np.ndarray):
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(
        np.ascontiguousarray(got).view(np.uint8), np.ascontiguousarray(want).view(np.uint8)
    )


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int64, np.int8, np.bool_])
@pytest.mark.parametrize("dim", [0, 1, 2, -1])
def test_cat_every_dim_and_dtype(vulkan, dtype, dim):
    shapes = [(3, 5, 7), (3, 5, 7), (3, 5, 7)]
    d = dim % 3
    for i, s in enumerate(shapes):  # different sizes along the cat dim: 1, 2 and 3
        shapes[i] = s[:d] + (i + 1,) + s[d + 1 :]
    arrays = [data(dtype, *s) for s in shapes]
    got, ops = cat_on_device(arrays, dim)
    ran_on_device(ops, "cat")
    assert_same_bits(got, np.concatenate(arrays, axis=dim))


@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.bool_])
def test_cat_large_inputs_keep_every_bit(vulkan, dtype):
    # >= 4096 elements per input, odd sizes: bool slices start mid-word of the output
    arrays = [data(dtype, 4097), data(dtype, 1), data(dtype, 5003), data(dtype, 3)]
    got, ops = cat_on_device(arrays, 0)
    ran_on_device(ops, "cat")
    assert_same_bits(got, np.concatenate(arrays))
    arrays = [data(dtype, 67, 61), data(dtype, 67, 3)]
    got, _ = cat_on_device(arrays, 1)
    assert_same_bits(got, np.concatenate(arrays, axis=1))


@pytest.mark.parametrize("view", sorted(VIEWS))
@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.bool_])
def test_cat_of_strided_views(vulkan, view, dtype):
    a, b = data(dtype, 40, 90), data(dtype, 40, 90)
    va, vb = VIEWS[view](a), VIEWS[view](b)
    for dim in (0, 1):
        got, ops = cat_on_device([a, b], dim, views=VIEWS[view])
        ran_on_device(ops, "cat")
        assert_same_bits(got, np.concatenate([va, vb], axis=dim))


def test_cat_with_empty_inputs(vulkan):
    a, b = data(np.float32, 4, 0, 3), data(np.float32, 4, 2, 3)
    got, _ = cat_on_device([a, b, a], 1)
    assert_same_bits(got, np.concatenate([a, b, a], axis=1))
    e = data(np.float32, 0, 5)
    got, _ = cat_on_device([e, e], 1)
    assert got.shape == (0, 10)
    # a legacy empty 1-D tensor is skipped, as in PyTorch
    got, _ = cat_on_device([np.zeros(0, np.float32), data(np.float32, 2, 3)], 0)
    assert got.shape == (2, 3)


def test_cat_equals_cpu_path_and_gradient(vulkan):
    a, b = rand(33, 70), rand(33, 5)
    ta = dev(a).requires_grad_()
    tb = dev(b).requires_grad_()
    w = dev(rand(33, 75))
    (gpucore.cat([ta, tb], 1) * w).sum().backward()
    ca = gpucore.tensor(a).requires_grad_()
    cb = gpucore.tensor(b).requires_grad_()
    on_cpu(lambda: (gpucore.cat([ca, cb], 1) * w.cpu()).sum().backward())
    np.testing.assert_array_equal(ta.grad.cpu().numpy(), ca.grad.numpy())
    np.testing.assert_array_equal(tb.grad.cpu().numpy(), cb.grad.numpy())


def test_stack_and_mixed_dtypes_run_on_device(vulkan):
    a, b = data(np.int32, 50, 90), data(np.int64, 50, 90)
    with gpucore.dispatch.trace_ops() as ops:
        got = gpucore.stack([dev(a), dev(b)], 1).cpu().numpy()
    ran_on_device(ops, "cat")
    want = np.stack([a.astype(np.int64), b], 1)
    assert_same_bits(got, want)
