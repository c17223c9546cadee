"""gpucore._cpu against float64 numpy references (cpu/README.md): the GEMM (shapes,
transposes, alpha/beta, empty and batched operands, accumulation order, memoryviews)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from cpu_ext import FLOATS, RTOL_ACC, C, close, randn, rng


# --------------------------------------------------------------------------------------- gemm
def gemm_check(dtype, m, n, k, ta, tb, alpha, beta, seed=0):
    r = rng(seed)
    a = r.standard_normal((k, m) if ta else (m, k)).astype(dtype)
    b = r.standard_normal((n, k) if tb else (k, n)).astype(dtype)
    c0 = r.standard_normal((m, n)).astype(dtype)
    c = c0.copy()
    C.gemm(a, b, c, 1, m, n, k, ta, tb, alpha, beta, 0, 0, 0)
    oa = a.astype(np.float64).T if ta else a.astype(np.float64)
    ob = b.astype(np.float64).T if tb else b.astype(np.float64)
    ref = alpha * (oa @ ob) + (beta * c0.astype(np.float64) if beta != 0 else 0.0)
    bound = abs(alpha) * (np.abs(oa) @ np.abs(ob)) + abs(beta) * np.abs(c0.astype(np.float64))
    err = np.abs(c.astype(np.float64) - ref)
    assert np.all(err <= RTOL_ACC[dtype] * bound + 1e-30), float(
        (err - RTOL_ACC[dtype] * bound).max()
    )


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("ta,tb", list(itertools.product([0, 1], [0, 1])))
@pytest.mark.parametrize(
    "m,n,k",
    [
        (1, 1, 1),
        (7, 13, 1),
        (13, 7, 129),
        (65, 257, 7),
        (129, 1, 65),
        (1, 257, 13),
        (6, 9, 2),
        (257, 65, 300),
    ],
)
def test_gemm_shapes_and_transposes(dtype, ta, tb, m, n, k):
    gemm_check(dtype, m, n, k, ta, tb, 1.0, 0.0)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("ta,tb", list(itertools.product([0, 1], [0, 1])))
@pytest.mark.parametrize("alpha,beta", [(0.5, 2.0), (-1.5, 1.0), (2.0, -0.25), (0.0, 3.0)])
def test_gemm_alpha_beta(dtype, ta, tb, alpha, beta):
    gemm_check(dtype, 13, 7, 65, ta, tb, alpha, beta, seed=1)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("m,n,k", [(0, 5, 3), (5, 0, 3), (0, 0, 0), (5, 3, 0)])
def test_gemm_empty(dtype, m, n, k):
    a = np.ones((m, k), dtype)
    b = np.ones((k, n), dtype)
    c = np.full((m, n), 3.0, dtype)
    C.gemm(a, b, c, 1, m, n, k, 0, 0, 1.0, 0.5, 0, 0, 0)
    np.testing.assert_array_equal(c, np.full((m, n), 1.5, dtype))  # k == 0: C = beta * C
    c[...] = np.nan
    C.gemm(a, b, c, 1, m, n, k, 0, 0, 1.0, 0.0, 0, 0, 0)
    np.testing.assert_array_equal(c, np.zeros((m, n), dtype))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("ta,tb", list(itertools.product([0, 1], [0, 1])))
def test_gemm_beta_zero_ignores_nan_in_c(dtype, ta, tb):
    a = randn((7, 13), dtype)
    b = randn((13, 5), dtype, 1)
    oa, ob = (a.T.copy() if ta else a), (b.T.copy() if tb else b)
    c = np.full((7, 5), np.nan, dtype)
    C.gemm(oa, ob, c, 1, 7, 5, 13, ta, tb, 1.0, 0.0, 0, 0, 0)
    assert np.isfinite(c).all()
    close(c, a.astype(np.float64) @ b, dtype, rtol=RTOL_ACC[dtype], atol=1e-5)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("ta,tb", list(itertools.product([0, 1], [0, 1])))
def test_gemm_batch_strides(dtype, ta, tb):
    batch, m, n, k = 3, 7, 5, 13
    r = rng(3)
    a_shape = (k, m) if ta else (m, k)
    b_shape = (n, k) if tb else (k, n)
    a = r.standard_normal((batch,) + a_shape).astype(dtype)
    bsh = r.standard_normal(b_shape).astype(dtype)  # broadcast over the batch: stride 0
    # C with a gap of 4 elements between batch items
    sc = m * n + 4
    cbuf = np.full(batch * sc, 7.0, dtype)
    C.gemm(a, bsh, cbuf, batch, m, n, k, ta, tb, 1.0, 0.0, m * k, 0, sc)
    for i in range(batch):
        oa = a[i].astype(np.float64).T if ta else a[i].astype(np.float64)
        ob = bsh.astype(np.float64).T if tb else bsh.astype(np.float64)
        got = cbuf[i * sc : i * sc + m * n].reshape(m, n)
        close(got, oa @ ob, dtype, rtol=RTOL_ACC[dtype], atol=1e-5)
        np.testing.assert_array_equal(cbuf[i * sc + m * n : (i + 1) * sc], 7.0)
    # A broadcast instead of B
    b = r.standard_normal((batch,) + b_shape).astype(dtype)
    a1 = a[0].copy()
    c = np.empty((batch, m, n), dtype)
    C.gemm(a1, b, c, batch, m, n, k, ta, tb, 1.0, 0.0, 0, n * k, m * n)
    for i in range(batch):
        oa = a1.astype(np.float64).T if ta else a1.astype(np.float64)
        ob = b[i].astype(np.float64).T if tb else b[i].astype(np.float64)
        close(c[i], oa @ ob, dtype, rtol=RTOL_ACC[dtype], atol=1e-5)


@pytest.mark.parametrize("dtype", FLOATS)
def test_gemm_output_stride_zero_accumulates_in_order(dtype):
    batch, m, n, k = 4, 3, 5, 7
    a = randn((batch, m, k), dtype)
    b = randn((batch, k, n), dtype, 1)
    c = np.zeros((m, n), dtype)
    C.gemm(a, b, c, batch, m, n, k, 0, 0, 1.0, 1.0, m * k, k * n, 0)
    ref = np.einsum("bmk,bkn->mn", a.astype(np.float64), b.astype(np.float64))
    close(c, ref, dtype, rtol=RTOL_ACC[dtype], atol=1e-5)


def test_gemm_accepts_memoryview_and_releases_it():
    ba = bytearray(4 * 6)
    mv = memoryview(ba).cast("f")
    a = np.arange(6, dtype=np.float32)
    b = np.ones(6, np.float32)
    C.gemm(a, b, mv, 1, 2, 3, 1, 0, 0, 1.0, 0.0, 0, 0, 0)  # [2,1] @ [1,3]
    assert list(mv[:6]) == [0.0, 0.0, 0.0, 1.0, 1.0, 1.0]
    mv.release()  # raises BufferError if the extension leaked an export
    ba.extend(b"x")
