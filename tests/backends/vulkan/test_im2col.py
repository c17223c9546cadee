"""im2col / col2im on the Vulkan device (shaders/im2col.comp) against the CPU kernels.

Both directions must match the CPU bit for bit: im2col is a copy, and col2im (a gather on the
device, a scatter-add on the CPU) sums each input pixel's contributions in the same order.
"""

from __future__ import annotations

import numpy as np
import pytest
from device_helpers import on_cpu

import gpucore
from gpucore.ops import nn as nn_ops

RNG = np.random.default_rng(7)

# (input shape, kernel, stride, padding, dilation)
GEOMETRIES = [
    ((1, 1, 1, 1), 1, 1, 0, 1),  # a single pixel
    ((2, 3, 8, 8), 3, 1, 1, 1),  # the common 3x3 'same' conv
    ((2, 3, 9, 7), (3, 2), 2, 1, (2, 1)),  # strided, dilated, rectangular
    ((1, 2, 10, 11), 2, (3, 1), (0, 2), 1),  # padding wider than the kernel's reach
    ((3, 4, 12, 12), 2, 2, 0, 1),  # pooling windows (no overlap)
    ((1, 5, 13, 9), (4, 3), (2, 3), (2, 1), (1, 2)),  # stride not dividing anything
    ((1, 1, 64, 64), 1, 1, 0, 1),  # 4096 elements in and out
    ((1, 1, 4097, 1), (2, 1), 1, 0, 1),  # 4097 in, 4096 out
    ((1, 1, 4095, 1), 1, 1, 0, 1),  # 4095
    ((2, 16, 28, 28), 5, 1, 2, 1),  # conv-sized: 2 x 400 x 784 columns
]


def _args(g):
    shape, k, s, p, d = g
    return shape, dict(kernel_size=k, stride=s, padding=p, dilation=d)


def _dev(a: np.ndarray) -> gpucore.Tensor:
    return gpucore.tensor(a).to("vulkan")


def _exact(dev_t, cpu_t):
    assert dev_t.device.type == "vulkan"
    np.testing.assert_array_equal(dev_t.numpy(), cpu_t.numpy())


@pytest.mark.parametrize("g", GEOMETRIES, ids=lambda g: "x".join(map(str, g[0])) + f"-k{g[1]}")
def test_im2col_matches_cpu(vulkan, g):
    shape, kw = _args(g)
    x = RNG.standard_normal(shape).astype(np.float32)
    with gpucore.dispatch.trace_ops() as ops:
        got = nn_ops.im2col(_dev(x), **kw)
    assert ("im2col", "vulkan") in [(n, b) for n, b, _ in ops]
    _exact(got, on_cpu(nn_ops.im2col, gpucore.tensor(x), **kw))


@pytest.mark.parametrize("g", GEOMETRIES, ids=lambda g: "x".join(map(str, g[0])) + f"-k{g[1]}")
def test_col2im_matches_cpu(vulkan, g):
    shape, kw = _args(g)
    col_shape = tuple(on_cpu(nn_ops.im2col, gpucore.zeros(shape), **kw).shape)
    col = RNG.standard_normal(col_shape).astype(np.float32)
    with gpucore.dispatch.trace_ops() as ops:
        got = nn_ops.col2im(_dev(col), shape, **kw)
    assert ("col2im", "vulkan") in [(n, b) for n, b, _ in ops]
    _exact(got, on_cpu(nn_ops.col2im, gpucore.tensor(col), shape, **kw))


def test_overlapping_windows_sum_in_cpu_order(vulkan):
    # Large overlapping windows (every pixel gathers up to 25 terms) with values spanning many
    # magnitudes, where any other summation order rounds differently.
    shape, kw = (1, 2, 9, 9), dict(kernel_size=5, stride=1, padding=2, dilation=1)
    col_shape = tuple(on_cpu(nn_ops.im2col, gpucore.zeros(shape), **kw).shape)
    col = RNG.standard_normal(col_shape) * 10.0 ** RNG.integers(-6, 6, col_shape)
    col = col.astype(np.float32)
    _exact(
        nn_ops.col2im(_dev(col), shape, **kw),
        on_cpu(nn_ops.col2im, gpucore.tensor(col), shape, **kw),
    )


def test_offset_and_strided_inputs(vulkan):
    # a view that starts inside its block (element offset) and a permuted (non-contiguous) one
    base = RNG.standard_normal((3, 2, 6, 7)).astype(np.float32)
    kw = dict(kernel_size=3, stride=2, padding=1)
    d = _dev(base)
    _exact(nn_ops.im2col(d[1:], **kw), on_cpu(nn_ops.im2col, gpucore.tensor(base[1:]), **kw))
    perm = np.ascontiguousarray(base.transpose(0, 1, 3, 2))
    _exact(
        nn_ops.im2col(d.permute(0, 1, 3, 2), **kw),
        on_cpu(nn_ops.im2col, gpucore.tensor(perm), **kw),
    )
    cols = on_cpu(nn_ops.im2col, gpucore.tensor(base), **kw).numpy()
    dc = _dev(np.concatenate([cols, cols]))
    _exact(
        nn_ops.col2im(dc[3:], base.shape, **kw),
        on_cpu(nn_ops.col2im, gpucore.tensor(cols), base.shape, **kw),
    )


def test_split_over_binding_limit(vulkan, monkeypatch):
    # Work larger than one storage binding is split into dispatches over ranges of (b, c)
    # planes; a small pretend limit exercises that path with small tensors.
    limits = dict(vulkan.ctx.limits)
    limits["maxStorageBufferRange"] = 16 << 10  # 16 KiB: 4096 floats per binding
    shape, kw = (3, 5, 16, 16), dict(kernel_size=3, stride=1, padding=1)
    x = RNG.standard_normal(shape).astype(np.float32)
    ref = on_cpu(nn_ops.im2col, gpucore.tensor(x), **kw)
    col = RNG.standard_normal(tuple(ref.shape)).astype(np.float32)
    ref_back = on_cpu(nn_ops.col2im, gpucore.tensor(col), shape, **kw)
    dx, dcol = _dev(x), _dev(col)
    gpucore.vulkan.synchronize()
    before = gpucore.vulkan.stats()["dispatches"]
    monkeypatch.setattr(vulkan.ctx, "limits", limits)
    got = nn_ops.im2col(dx, **kw)
    back = nn_ops.col2im(dcol, shape, **kw)
    gpucore.vulkan.synchronize()
    monkeypatch.undo()
    # im2col: 2304 floats per plane -> 1 plane per dispatch, 15 planes; col2im the same
    assert gpucore.vulkan.stats()["dispatches"] - before >= 30
    _exact(got, ref)
    _exact(back, ref_back)


def test_conv_gradients_through_im2col(vulkan):
    # im2col's backward is col2im and col2im's is im2col: autograd on the device equals the CPU.
    x = RNG.standard_normal((2, 3, 7, 7)).astype(np.float32)
    kw = dict(kernel_size=3, stride=2, padding=1)

    def run(t):
        t.requires_grad_(True)
        cols = nn_ops.im2col(t, **kw)
        back = nn_ops.col2im(cols * cols, (2, 3, 7, 7), **kw)
        back.sum().backward()
        return back.detach(), t.grad

    dv, dg = run(_dev(x))
    cv, cg = on_cpu(run, gpucore.tensor(x))
    np.testing.assert_allclose(dv.numpy(), cv.numpy(), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(dg.numpy(), cg.numpy(), rtol=1e-6, atol=1e-6)
    assert dg.device.type == "vulkan"


def test_float64_stays_on_cpu(vulkan):
    # the shader is float32; other dtypes run in the C extension
    x = gpucore.tensor(RNG.standard_normal((1, 1, 5, 5)))  # float64
    with gpucore.dispatch.trace_ops() as ops:
        out = nn_ops.im2col(x, kernel_size=2)
    assert ("im2col", "cpu") in [(n, b) for n, b, _ in ops]
    assert out.dtype is gpucore.float64
