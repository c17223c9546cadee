"""Tensors larger than one storage binding (maxStorageBufferRange) still work on the device:
row-wise kernels run in bands that each fit a binding."""

from __future__ import annotations

import numpy as np
import pytest

import gpucore


@pytest.fixture
def big_n(vulkan):
    # one element more than a binding holds, in float32
    return vulkan.ctx.limits["maxStorageBufferRange"] // 4 + 1


def test_unary_and_binary_above_one_binding(vulkan, big_n):
    x = gpucore.arange(big_n, dtype=gpucore.float32) * 1e-6 - 10.0
    assert x.device.type == "vulkan"
    y = (x.relu() + x * 0.5).tanh()
    host = np.arange(big_n, dtype=np.float32) * np.float32(1e-6) - np.float32(10.0)
    ref = np.tanh(np.maximum(host, 0) + host * np.float32(0.5))
    got = y.numpy()
    # spot-check the band edges and a sample, then the whole array
    np.testing.assert_allclose(got[-5:], ref[-5:], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)


def test_comparison_with_packed_bools_above_one_binding(vulkan, big_n):
    x = gpucore.arange(big_n, dtype=gpucore.float32)
    m = x > float(big_n - 7)
    assert m.dtype is gpucore.bool
    got = m.numpy()
    assert got.sum() == 6 and got[-6:].all() and not got[:-6].any()


def test_broadcast_rows_above_one_binding(vulkan, big_n):
    cols = 64
    rows = big_n // cols + 1
    a = gpucore.ones(rows, cols)
    b = gpucore.arange(cols, dtype=gpucore.float32)
    out = (a * b).numpy()
    assert out.shape == (rows, cols)
    np.testing.assert_array_equal(out[0], np.arange(cols, dtype=np.float32))
    np.testing.assert_array_equal(out[-1], np.arange(cols, dtype=np.float32))


def test_ops_without_bands_run_on_the_cpu_above_one_binding(vulkan, big_n):
    # Reductions, softmax and GEMM read whole rows or columns: a tensor above one binding goes to
    # the C extension (the result is the same; only where it ran differs).
    x = gpucore.arange(big_n, dtype=gpucore.float32) * 1e-6
    host = np.arange(big_n, dtype=np.float64) * 1e-6
    with gpucore.dispatch.trace_ops() as ops:
        total = x.sum()
        top = x.max()
        cols = x[: (big_n // 64) * 64].reshape(-1, 64)
        prod = cols @ gpucore.ones(64, 1)
        sm = cols.softmax(-1)
    assert ("sum", "cpu", ()) in ops and ("matmul", "cpu", (big_n // 64, 1)) in ops
    assert float(total) == pytest.approx(host.sum(), rel=1e-5)
    assert float(top) == pytest.approx(host[-1], rel=1e-6)
    ref_rows = host[: (big_n // 64) * 64].reshape(-1, 64)
    got = prod.numpy()
    np.testing.assert_allclose(got[[0, -1], 0], ref_rows[[0, -1]].sum(1), rtol=1e-5)
    e = np.exp(ref_rows[-1] - ref_rows[-1].max())
    np.testing.assert_allclose(sm.numpy()[-1], e / e.sum(), rtol=1e-5)
